package releasesign

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The client signs what it writes, and hides and reports what does not verify.
func TestSecretClientSignsWritesAndHidesForgeries(t *testing.T) {
	ctx := context.Background()
	forgedNs := record("x", "deployed", "5")
	forgedNs.Namespace = "t1"
	cs := fake.NewClientset(forgedNs) // forged: unsigned
	refused := map[string]error{}
	c := NewSecretClient(cs.CoreV1().Secrets("t1"), "t1", Keys{Current: testKey}, func(s string, err error) { refused[s] = err })

	if _, err := c.Create(ctx, record("x", "deployed", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, err := cs.CoreV1().Secrets("t1").Get(ctx, "sh.helm.release.v1.x.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := testKey.Verify("t1", stored); err != nil {
		t.Fatalf("a record the client created: %v", err)
	}

	list, err := c.List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "sh.helm.release.v1.x.v1" {
		t.Errorf("List returned %d records, want only the signed v1", len(list.Items))
	}
	if _, err := c.Get(ctx, "sh.helm.release.v1.x.v5", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of the forged record: %v, want not found", err)
	}
	if err := c.Delete(ctx, "sh.helm.release.v1.x.v5", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Delete of the forged record: %v, want not found", err)
	}
	if _, err := cs.CoreV1().Secrets("t1").Get(ctx, "sh.helm.release.v1.x.v5", metav1.GetOptions{}); err != nil {
		t.Errorf("the forged record was deleted: %v", err)
	}
	if !errors.Is(refused["sh.helm.release.v1.x.v5"], ErrUnsigned) || len(refused) != 1 {
		t.Errorf("refused %v, want the forged v5 as unsigned", refused)
	}

	// Update re-signs: a status change is a new signed state.
	up := stored.DeepCopy()
	up.Labels["status"] = "superseded"
	if _, err := c.Update(ctx, up, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "sh.helm.release.v1.x.v1", metav1.GetOptions{}); err != nil {
		t.Errorf("Get of an updated record: %v", err)
	}
}

// pagedSecrets serves Lists of its Secrets a page at a time, as the API server does for a
// Limit, and records the largest page it served.
type pagedSecrets struct {
	corev1client.SecretInterface
	items          []corev1.Secret
	pages, largest int
}

func (p *pagedSecrets) List(_ context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	from, _ := strconv.Atoi(opts.Continue)
	to := len(p.items)
	if opts.Limit > 0 && from+int(opts.Limit) < to {
		to = from + int(opts.Limit)
	}
	list := &corev1.SecretList{Items: slices.Clone(p.items[from:to])}
	if to < len(p.items) {
		list.Continue = strconv.Itoa(to)
	}
	p.pages++
	p.largest = max(p.largest, len(list.Items))
	return list, nil
}

// A List holds at most a page of Secrets it has not verified, however many a namespace
// editor labels as records of their release, and returns the signed ones of every page.
func TestListReadsAPageAtATime(t *testing.T) {
	p := &pagedSecrets{}
	for v := 1; v <= 10; v++ {
		planted := record("x", "deployed", strconv.Itoa(v))
		planted.Data["release"] = make([]byte, 1<<20)
		p.items = append(p.items, *planted)
	}
	for _, v := range []string{"11", "12"} {
		signed := record("x", "superseded", v)
		testKey.Sign("t1", signed)
		p.items = append(p.items, *signed)
	}
	refused := 0
	c := NewSecretClient(p, "t1", Keys{Current: testKey}, func(string, error) { refused++ })
	list, err := c.List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || refused != 10 || list.Continue != "" {
		t.Errorf("%d records (continue %q), %d refused; want the 2 signed, 10 refused, no more to read", len(list.Items), list.Continue, refused)
	}
	if p.largest > ListPage || p.pages != 3 {
		t.Errorf("read in %d pages of at most %d Secrets, want 3 of at most %d", p.pages, p.largest, ListPage)
	}
}

// A refused record where Helm writes the release's next revision is moved aside, data and
// type kept under DisplacedSuffix, without labels, and reported: unsigned (what a person's
// helm upgrade writes) and changed alike. A record of another key, which restoring the key
// makes good again, and a record of this operator are left where they are.
func TestCreateMovesRefusedRecordsAside(t *testing.T) {
	ctx := context.Background()
	keys := Keys{Current: testKey}
	unsigned := record("a", "deployed", "2")
	changed := record("b", "deployed", "2")
	testKey.Sign("t1", changed)
	changed.Labels["status"] = "superseded"
	ofOtherKey := record("c", "deployed", "2")
	otherKey.Sign("t1", ofOtherKey)
	ours := record("d", "deployed", "2")
	testKey.Sign("t1", ours)
	for _, s := range []*corev1.Secret{unsigned, changed, ofOtherKey, ours} {
		s.Namespace = "t1"
	}
	cs := fake.NewClientset(unsigned, changed, ofOtherKey, ours)
	refused := map[string]error{}
	c := NewSecretClient(cs.CoreV1().Secrets("t1"), "t1", keys, func(s string, err error) { refused[s] = err })

	for _, tc := range []struct {
		old   *corev1.Secret
		moved bool
	}{{unsigned, true}, {changed, true}, {ofOtherKey, false}, {ours, false}} {
		_, err := c.Create(ctx, record(tc.old.Labels["name"], "deployed", "2"), metav1.CreateOptions{})
		if tc.moved != (err == nil) {
			t.Errorf("creating over %s: %v, want moved aside: %v", tc.old.Name, err, tc.moved)
		}
		if !tc.moved {
			if got, _ := cs.CoreV1().Secrets("t1").Get(ctx, tc.old.Name, metav1.GetOptions{}); got == nil ||
				!slices.Equal(got.Data["release"], tc.old.Data["release"]) || got.Annotations[SignatureAnnotation] != tc.old.Annotations[SignatureAnnotation] {
				t.Errorf("%s was replaced", tc.old.Name)
			}
			continue
		}
		if got, err := c.Get(ctx, tc.old.Name, metav1.GetOptions{}); err != nil || keys.Verify("t1", got) != nil {
			t.Errorf("%s after the create: %v, want the operator's signed record", tc.old.Name, err)
		}
		kept, err := cs.CoreV1().Secrets("t1").Get(ctx, tc.old.Name+DisplacedSuffix, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the copy of %s: %v", tc.old.Name, err)
		}
		if len(kept.Labels) != 0 || kept.Type != tc.old.Type || !slices.Equal(kept.Data["release"], tc.old.Data["release"]) ||
			!strings.Contains(kept.Annotations[DisplacedLabelsAnnotation], `"status":"`+tc.old.Labels["status"]+`"`) {
			t.Errorf("the copy of %s: labels %v, type %s, annotations %v", tc.old.Name, kept.Labels, kept.Type, kept.Annotations)
		}
		var displaced *DisplacedError
		if !errors.As(refused[tc.old.Name], &displaced) || !strings.Contains(Describe(tc.old.Name, refused[tc.old.Name]), "moved aside") {
			t.Errorf("%s reported as %v", tc.old.Name, refused[tc.old.Name])
		}
	}
}
