package hostfn

import "sync"

// Map gives Go values integer ids, so that C can be handed an id as
// userData instead of a Go pointer (I5). Put, Get, Take and Delete are O(1)
// and safe for concurrent use. An id is never reused while its entry is
// live, and a stale id (its entry deleted) misses even after its slot is
// reused, because ids carry the slot's generation. Once an entry is deleted
// the Map keeps no reference to its value.
//
// The zero Map is ready to use.
type Map[T any] struct {
	mu    sync.Mutex
	slots []slot[T]
	free  []uint32
	live  int
}

type slot[T any] struct {
	gen  uint32
	used bool
	v    T
}

// An id is 1 + the slot index in its low idxBits bits and the slot's
// generation above them, so 0 is never an id and a stale id (its entry
// deleted, its slot reused) does not match. On 64-bit platforms that is 32
// bits each; where uintptr has 32 bits, 20 bits of index (about a million
// live entries) and 12 of generation.
const (
	ptrBits = 32 << (^uintptr(0) >> 63)
	idxBits = 20 + 12*(ptrBits/64) // 32 on 64-bit, 20 on 32-bit
	genBits = ptrBits - idxBits
	idxMask = 1<<idxBits - 1
	genMask = 1<<genBits - 1
	maxSlot = idxMask - 1 // the largest slot index (idx+1 must fit)
)

func makeID(idx int, gen uint32) uintptr {
	return uintptr(uint64(gen&genMask)<<idxBits | uint64(idx+1))
}

func splitID(id uintptr) (idx int, gen uint32) {
	return int(uint64(id)&idxMask) - 1, uint32(uint64(id) >> idxBits & genMask)
}

// Put stores v and returns its id (never 0). It allocates only when the map
// grows past its largest size so far.
func (m *Map[T]) Put(v T) uintptr {
	m.mu.Lock()
	var idx int
	if n := len(m.free); n > 0 {
		idx = int(m.free[n-1])
		m.free = m.free[:n-1]
	} else {
		if len(m.slots) > maxSlot {
			m.mu.Unlock()
			panic("lifetime: Map: more live entries than ids can name")
		}
		m.slots = append(m.slots, slot[T]{})
		idx = len(m.slots) - 1
	}
	s := &m.slots[idx]
	s.used, s.v = true, v
	id := makeID(idx, s.gen)
	m.live++
	m.mu.Unlock()
	return id
}

func (m *Map[T]) find(id uintptr) *slot[T] {
	idx, gen := splitID(id)
	if idx < 0 || idx >= len(m.slots) {
		return nil
	}
	s := &m.slots[idx]
	if !s.used || s.gen != gen {
		return nil
	}
	return s
}

// Get returns the value of id; ok is false for an unknown or deleted id.
func (m *Map[T]) Get(id uintptr) (v T, ok bool) {
	m.mu.Lock()
	if s := m.find(id); s != nil {
		v, ok = s.v, true
	}
	m.mu.Unlock()
	return v, ok
}

// load returns the value of id and, when take reports true for it, deletes
// the entry, under one lock (Invoke's look-up of a Once callback).
func (m *Map[T]) load(id uintptr, take func(*T) bool) (v T, ok bool) {
	m.mu.Lock()
	if s := m.find(id); s != nil {
		v, ok = s.v, true
		if take(&s.v) {
			m.remove(id, s)
		}
	}
	m.mu.Unlock()
	return v, ok
}

// Take returns the value of id and deletes the entry.
func (m *Map[T]) Take(id uintptr) (v T, ok bool) {
	m.mu.Lock()
	if s := m.find(id); s != nil {
		v, ok = s.v, true
		m.remove(id, s)
	}
	m.mu.Unlock()
	return v, ok
}

// Delete removes the entry of id; it reports whether there was one.
func (m *Map[T]) Delete(id uintptr) bool {
	m.mu.Lock()
	s := m.find(id)
	if s != nil {
		m.remove(id, s)
	}
	m.mu.Unlock()
	return s != nil
}

func (m *Map[T]) remove(id uintptr, s *slot[T]) {
	var zero T
	s.v, s.used = zero, false
	s.gen = (s.gen + 1) & genMask
	idx, _ := splitID(id)
	m.free = append(m.free, uint32(idx))
	m.live--
}

// Len is the number of live entries.
func (m *Map[T]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live
}
