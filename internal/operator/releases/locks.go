package releases

import "sync"

// Key names a release across namespaces, as the release guard's locks, the pending
// repair's operations and Versions key it.
func Key(namespace, name string) string { return namespace + "/" + name }

// KeyedMutex is a set of mutexes by key, each kept only while it is held or awaited: the
// release guard holds a release's (Key) for each Helm operation on it, across kinds, and
// Manifests.Changing asks whether one is held.
type KeyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// NewKeyedMutex returns a KeyedMutex with no key held.
func NewKeyedMutex() *KeyedMutex { return &KeyedMutex{locks: map[string]*keyedLock{}} }

// Held reports whether key is held or awaited.
func (m *KeyedMutex) Held(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.locks[key] != nil
}

// Lock locks key and returns the func that unlocks it.
func (m *KeyedMutex) Lock(key string) (unlock func()) {
	m.mu.Lock()
	l := m.locks[key]
	if l == nil {
		l = &keyedLock{}
		m.locks[key] = l
	}
	l.users++
	m.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		m.mu.Lock()
		if l.users--; l.users == 0 {
			delete(m.locks, key)
		}
		m.mu.Unlock()
	}
}
