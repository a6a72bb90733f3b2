-- Argo CD health check for the warpdrive-operator's custom resources, the same for every kind.
-- It reads the status contract of docs/status.md and agrees with kstatus (Flux, kpt) wherever
-- both apply. In this order:
--   Suspended    Paused=True: the pause annotation stops every reconcile (no kstatus counterpart)
--   Degraded     Stalled=True for the current generation (kstatus: Failed)
--   Progressing  no status yet, a generation the manager has not finished, Reconciling=True,
--                or Ready not True (kstatus: InProgress)
--   Healthy      Ready=True at the current generation (kstatus: Current)
-- Argo CD runs scripts from argocd-cm without Lua's string library: use the base and table
-- libraries only. Edit this file, then run `go test ./test/argocd/ -run TestConfigMap -update`
-- to copy it into argocd-cm.yaml; the test fails while the two differ.

local hs = {}

local metadata = obj.metadata or {}
local generation = metadata.generation
local status = obj.status

-- The conditions by type. The list is a map keyed by type, so each type appears at most once.
local conditions = {}
if type(status) == "table" and type(status.conditions) == "table" then
  for _, c in ipairs(status.conditions) do
    if type(c) == "table" and type(c.type) == "string" and conditions[c.type] == nil then
      conditions[c.type] = c
    end
  end
end
local ready = conditions["Ready"]
local reconciling = conditions["Reconciling"]
local stalled = conditions["Stalled"]
local paused = conditions["Paused"]

local function isTrue(c)
  return c ~= nil and c.status == "True"
end

local function hasText(s)
  return type(s) == "string" and s ~= ""
end

-- older tells whether a generation recorded in the status is below the CR's generation, i.e.
-- was written before the latest spec edit.
local function older(observed)
  return type(observed) == "number" and type(generation) == "number" and observed < generation
end

-- awaited says what the resource is waiting for: the message of the manager's Reconciling or
-- (not True) Ready condition, unless that condition predates the latest spec edit.
local function awaited(default)
  if isTrue(reconciling) and hasText(reconciling.message) and not older(reconciling.observedGeneration) then
    return reconciling.message
  end
  if ready ~= nil and not isTrue(ready) and hasText(ready.message) and not older(ready.observedGeneration) then
    return ready.message
  end
  return default
end

local function progressing(message)
  hs.status = "Progressing"
  hs.message = message
  return hs
end

if isTrue(paused) then
  hs.status = "Suspended"
  if ready ~= nil and ready.reason == "Paused" and hasText(ready.message) then
    hs.message = ready.message
  elseif hasText(paused.message) then
    hs.message = paused.message
  else
    hs.message = "reconciling is paused"
  end
  return hs
end

local observed = nil
if type(status) == "table" then
  observed = status.observedGeneration
end
-- A spec edit the manager has not handled yet: whatever the conditions say is about an older
-- generation (kstatus checks this before any condition).
local pending = type(observed) == "number" and type(generation) == "number" and observed ~= generation

-- A Stalled left over from an earlier generation does not count: the edit gets its own attempts.
if isTrue(stalled) and not pending and not older(stalled.observedGeneration) then
  hs.status = "Degraded"
  if hasText(stalled.message) then
    hs.message = stalled.message
  else
    hs.message = "reconciling has stalled"
  end
  return hs
end

if next(conditions) == nil then
  return progressing("waiting for the operator to reconcile the resource")
end
if pending then
  return progressing(awaited("waiting for the operator to reconcile generation " .. tostring(generation) ..
    " (the status is of generation " .. tostring(observed) .. ")"))
end
if observed == nil and not isTrue(ready) then
  return progressing(awaited("waiting for the operator to reconcile generation " .. tostring(generation)))
end
if isTrue(reconciling) then
  return progressing(awaited("reconciling"))
end
if ready == nil then
  return progressing("waiting for the Ready condition")
end
if older(ready.observedGeneration) then
  return progressing("waiting for the Ready condition of generation " .. tostring(generation))
end
if not isTrue(ready) then
  return progressing(awaited("waiting for the Ready condition to become True"))
end

hs.status = "Healthy"
if hasText(ready.message) then
  hs.message = ready.message
else
  hs.message = "ready"
end
return hs
