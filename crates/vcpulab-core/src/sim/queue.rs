//! The event queue: a binary min-heap ordered by (time, insertion sequence), so that
//! events at the same instant fire in the order they were scheduled — deterministic.
//! Cancellation is lazy: events carry their owner's generation and the dispatcher drops
//! those whose generation is stale.
//!
//! Removal is deferred too: `pop` returns a copy of the earliest event and leaves it at
//! the heap's root until the next operation. Handling an event usually schedules the
//! next one (a vCPU's next step, a re-armed timer), and that push then *replaces* the
//! root and sifts it down once — instead of a pop (sift to the bottom and back up) and
//! a push (sift up). The order of pops is the order of the keys, which are unique, so
//! it is exactly that of an eager heap.
//!
//! **Slotted events** (`push_slot`) are re-armed in place. An owner with at most one
//! pending event of a kind (a vCPU's next step) gives it a slot, and a push to the slot
//! takes the place of the event pending there: its key changes and it moves up or down
//! the slot heap, where cancel-and-push would leave the old event in the heap to be
//! popped and dropped as stale. Slotted events live in a second heap indexed by slot; a
//! pop takes the earlier of the two roots. Keys come from the same sequence as every
//! other push, so the pops are in exactly the order one heap would give — the only
//! difference is that superseded events are gone, so the caller must supersede only
//! events it would have dropped as stale (the world checks this in debug builds).
//! Written here rather than taken from a crate: the slots are dense owner indices, so
//! positions are a plain vector, and the deferred-root protocol spans both heaps.

use super::Nanos;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Where a ranked push's rank sits in the low half of the key, above the insertion
/// sequence (2^48 pushes: some 10^14, years of any run).
const RANK_SHIFT: u32 = 48;

/// (time, rank, seq) packed in one integer: time in the high half, so one comparison
/// orders by time, then by rank (0 unless `push_ranked`), then by insertion.
struct Entry<E> {
    key: u128,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest first.
        o.key.cmp(&self.key)
    }
}

/// A slot's place in the slot heap: its key and the slot (its event is in
/// `SlotHeap::evs`, so that a sift moves 32 bytes a level).
#[derive(Clone, Copy)]
struct SlotEntry {
    key: u128,
    slot: u32,
}

/// Not in the slot heap.
const NO_POS: u32 = u32::MAX;

/// A min-heap of slotted events with each slot's position, so that a slot's event can
/// be re-keyed in place.
struct SlotHeap<E> {
    heap: Vec<SlotEntry>,
    /// Position in `heap` of each slot's event (`NO_POS`: none pending).
    pos: Vec<u32>,
    /// Each slot's event (meaningful while the slot is in the heap).
    evs: Vec<E>,
}

impl<E: Copy> SlotHeap<E> {
    #[inline]
    fn root_key(&self) -> Option<u128> {
        self.heap.first().map(|e| e.key)
    }

    /// The root's event.
    #[inline]
    fn root_ev(&self) -> Option<E> {
        let e = self.heap.first()?;
        self.evs.get(e.slot as usize).copied()
    }

    #[inline]
    fn place(&mut self, i: usize, e: SlotEntry) {
        self.pos[e.slot as usize] = i as u32;
        self.heap[i] = e;
    }

    /// Moves the entry at `i` towards the root while it is earlier than its parent
    /// (the entries it passes move down one level: a hole, not swaps).
    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        assert!(i < self.heap.len());
        let h = self.heap.as_mut_ptr();
        // SAFETY: `i` and every parent of it are below `heap.len()` (asserted above),
        // and every entry's slot is below `pos.len()` (`set` grows `pos` before it
        // adds a slot). Unchecked, as the standard library's heap is: the sifts are
        // most of the queue's work.
        unsafe {
            let e = *h.add(i);
            while i > 0 {
                let parent = (i - 1) / 2;
                let p = *h.add(parent);
                if p.key <= e.key {
                    break;
                }
                *h.add(i) = p;
                *self.pos.get_unchecked_mut(p.slot as usize) = i as u32;
                i = parent;
            }
            *h.add(i) = e;
            *self.pos.get_unchecked_mut(e.slot as usize) = i as u32;
        }
    }

    /// Moves the entry at `i` towards the leaves while a child is earlier.
    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        assert!(i < n);
        let h = self.heap.as_mut_ptr();
        // SAFETY: as in `sift_up`; children are read only below `n`.
        unsafe {
            let e = *h.add(i);
            loop {
                let l = 2 * i + 1;
                if l >= n {
                    break;
                }
                let r = l + 1;
                let c = if r < n && (*h.add(r)).key < (*h.add(l)).key {
                    r
                } else {
                    l
                };
                let child = *h.add(c);
                if e.key <= child.key {
                    break;
                }
                *h.add(i) = child;
                *self.pos.get_unchecked_mut(child.slot as usize) = i as u32;
                i = c;
            }
            *h.add(i) = e;
            *self.pos.get_unchecked_mut(e.slot as usize) = i as u32;
        }
    }

    /// Sets `slot`'s event (replacing the pending one, if any: then true).
    #[inline]
    fn set(&mut self, slot: usize, key: u128, ev: E) -> bool {
        if slot >= self.pos.len() {
            self.grow(slot, ev);
        }
        self.evs[slot] = ev;
        let at = self.pos[slot];
        if at == NO_POS {
            let i = self.heap.len();
            self.heap.push(SlotEntry {
                key,
                slot: slot as u32,
            });
            self.sift_up(i);
            return false;
        }
        let i = at as usize;
        let old = self.heap[i].key;
        self.heap[i].key = key;
        if key < old {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
        true
    }

    #[cold]
    fn grow(&mut self, slot: usize, filler: E) {
        self.pos.resize(slot + 1, NO_POS);
        self.evs.resize(slot + 1, filler);
    }

    /// Removes the root.
    #[inline]
    fn remove_root(&mut self) {
        let Some(last) = self.heap.pop() else { return };
        let slot = if self.heap.is_empty() {
            last.slot
        } else {
            let root_slot = self.heap[0].slot;
            self.place(0, last);
            self.sift_down(0);
            root_slot
        };
        self.pos[slot as usize] = NO_POS;
    }

    /// The event pending in `slot`, if any.
    fn pending(&self, slot: usize) -> Option<&E> {
        if *self.pos.get(slot)? == NO_POS {
            return None;
        }
        self.evs.get(slot)
    }
}

/// Which heap's root `pop` last returned (still in place until the next operation).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Popped {
    Nothing,
    Main,
    Slot,
}

pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    slots: SlotHeap<E>,
    seq: u64,
    popped: Popped,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            slots: SlotHeap {
                heap: Vec::new(),
                pos: Vec::new(),
                evs: Vec::new(),
            },
            seq: 0,
            popped: Popped::Nothing,
        }
    }

    #[inline]
    fn next_key(&mut self, at: Nanos) -> u128 {
        let seq = self.seq;
        self.seq += 1;
        debug_assert!(
            seq < 1 << RANK_SHIFT,
            "push sequence overflows into the rank"
        );
        ((at.0 as u128) << 64) | seq as u128
    }

    #[inline]
    pub fn push(&mut self, at: Nanos, ev: E) {
        let key = self.next_key(at);
        self.push_keyed(key, ev);
    }

    /// Queues `ev` at `at` ranked `rank` among the events of the same instant: after
    /// every unranked one and those of lower rank, whatever the order of the pushes
    /// (ties of equal rank in push order). For events that fire together and whose
    /// order is a race the caller draws (the Linux host's aligned ticks, world.rs).
    #[inline]
    pub fn push_ranked(&mut self, at: Nanos, rank: u16, ev: E) {
        let key = self.next_key(at) | (u128::from(rank) << RANK_SHIFT);
        self.push_keyed(key, ev);
    }

    #[inline]
    fn push_keyed(&mut self, key: u128, ev: E) {
        let e = Entry { key, ev };
        // (A popped slot root can wait: this heap is the other one.)
        if self.popped == Popped::Main {
            self.popped = Popped::Nothing;
            if let Some(mut root) = self.heap.peek_mut() {
                *root = e; // sifted down when `root` drops
                return;
            }
        }
        self.heap.push(e);
    }

    /// Queues `ev` in `slot`, in place of the event pending there (which is dropped);
    /// true if there was one.
    #[inline]
    pub fn push_slot(&mut self, at: Nanos, slot: usize, ev: E) -> bool {
        let key = self.next_key(at);
        match self.popped {
            Popped::Slot => {
                // The popped root is this slot's own event: re-keyed in place (the
                // common case — a step's handler arms the next step).
                self.popped = Popped::Nothing;
                if self.slots.heap[0].slot as usize == slot {
                    self.slots.heap[0].key = key;
                    self.slots.evs[slot] = ev;
                    self.slots.sift_down(0);
                    return false;
                }
                self.slots.remove_root();
            }
            // A popped root of the other heap can wait.
            Popped::Main | Popped::Nothing => {}
        }
        self.slots.set(slot, key, ev)
    }

    /// The event pending in `slot` (not counting one `pop` just returned).
    pub fn slot_pending(&self, slot: usize) -> Option<&E> {
        if self.popped == Popped::Slot && self.slots.heap[0].slot as usize == slot {
            return None;
        }
        self.slots.pending(slot)
    }

    /// Removes the root `pop` returned.
    #[inline]
    fn settle(&mut self) {
        match self.popped {
            Popped::Nothing => {}
            Popped::Main => {
                self.popped = Popped::Nothing;
                self.heap.pop();
            }
            Popped::Slot => self.settle_slot(),
        }
    }

    /// Removes the slot heap's root, which `pop` returned. Apart from the common path,
    /// so that the plain heap's paths stay as small as they were without slots.
    #[inline(never)]
    fn settle_slot(&mut self) {
        self.popped = Popped::Nothing;
        self.slots.remove_root();
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.settle();
        if !self.slots.heap.is_empty() {
            return self.pop_either();
        }
        let e = self.heap.peek()?;
        let out = (Nanos((e.key >> 64) as u64), e.ev);
        self.popped = Popped::Main;
        Some(out)
    }

    /// `pop` when there are slotted events: the earlier of the two roots.
    #[inline(never)]
    fn pop_either(&mut self) -> Option<(Nanos, E)> {
        let s = self.slots.root_key()?;
        if self.heap.peek().is_none_or(|m| s < m.key) {
            let ev = self.slots.root_ev()?;
            self.popped = Popped::Slot;
            return Some((Nanos((s >> 64) as u64), ev));
        }
        let e = self.heap.peek()?;
        let out = (Nanos((e.key >> 64) as u64), e.ev);
        self.popped = Popped::Main;
        Some(out)
    }

    /// The event most likely to come after the one `pop` just returned: the earliest of
    /// the popped root's children and the other heap's root (a later push may still
    /// come first). A hint for prefetching, never for deciding anything.
    #[inline]
    pub fn peek_following(&self) -> Option<E> {
        let mut best: Option<(u128, E)> = None;
        let mut consider = |key: u128, ev: E| {
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, ev));
            }
        };
        let main = self.heap.as_slice();
        let slot = &self.slots.heap;
        match self.popped {
            Popped::Nothing => return None,
            Popped::Main => {
                // A max-heap of reversed keys: the larger entry is the earlier event.
                for e in main.get(1..3).unwrap_or(main.get(1..).unwrap_or(&[])) {
                    consider(e.key, e.ev);
                }
                if let Some(e) = slot.first() {
                    consider(e.key, self.slots.evs[e.slot as usize]);
                }
            }
            Popped::Slot => {
                for e in slot.get(1..3).unwrap_or(slot.get(1..).unwrap_or(&[])) {
                    consider(e.key, self.slots.evs[e.slot as usize]);
                }
                if let Some(e) = main.first() {
                    consider(e.key, e.ev);
                }
            }
        }
        best.map(|(_, ev)| ev)
    }

    pub fn peek_time(&mut self) -> Option<Nanos> {
        self.settle();
        let main = self.heap.peek().map(|e| e.key);
        let key = match (main, self.slots.root_key()) {
            (Some(m), Some(s)) => m.min(s),
            (m, s) => m.or(s)?,
        };
        Some(Nanos((key >> 64) as u64))
    }

    pub fn len(&self) -> usize {
        self.heap.len() + self.slots.heap.len() - (self.popped != Popped::Nothing) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ties_fire_in_insertion_order() {
        let mut q = EventQueue::new();
        q.push(Nanos(5), 'b');
        q.push(Nanos(1), 'a');
        q.push(Nanos(5), 'c');
        q.push(Nanos(5), 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
    }

    /// Ranked events of one instant fire after the unranked ones, by rank, whatever the
    /// order they were pushed in; other instants keep time order.
    #[test]
    fn ranked_ties_fire_by_rank_after_the_unranked() {
        let mut q = EventQueue::new();
        q.push_ranked(Nanos(5), 3, 'x');
        q.push_ranked(Nanos(5), 1, 'y');
        q.push(Nanos(5), 'a');
        q.push_ranked(Nanos(4), 9, 'w');
        q.push_ranked(Nanos(5), 1, 'z');
        q.push(Nanos(6), 'b');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['w', 'a', 'y', 'z', 'x', 'b']);
    }

    proptest! {
        /// Pushes between pops (as handlers do) against a sorted reference: the order
        /// of an eager heap, whatever the interleaving.
        #[test]
        fn interleaved_pushes_and_pops_keep_key_order(
            ops in proptest::collection::vec((0u64..40, 0usize..3), 0..300)
        ) {
            let mut q = EventQueue::new();
            let mut reference: Vec<(u64, usize)> = Vec::new(); // (time, insertion index)
            let (mut now, mut n) = (0u64, 0usize);
            for (dt, pushes) in ops {
                for _ in 0..pushes {
                    q.push(Nanos(now + dt), n);
                    reference.push((now + dt, n));
                    n += 1;
                }
                reference.sort();
                let got = q.pop();
                let want = if reference.is_empty() { None } else { Some(reference.remove(0)) };
                prop_assert_eq!(got.map(|(t, i)| (t.0, i)), want);
                if let Some((t, _)) = want {
                    now = t;
                }
                prop_assert_eq!(q.len(), reference.len());
            }
        }

        /// Slotted pushes supersede their slot's pending event; with plain pushes and
        /// pops interleaved, the pops are those of a sorted list from which each
        /// superseded event is taken out.
        #[test]
        fn slotted_pushes_supersede_and_keep_key_order(
            ops in proptest::collection::vec((0u64..40, 0usize..4, 0usize..3, 0usize..3), 0..300)
        ) {
            let mut q = EventQueue::new();
            // (time, insertion index, slot or usize::MAX)
            let mut reference: Vec<(u64, usize, usize)> = Vec::new();
            let (mut now, mut n) = (0u64, 0usize);
            for (dt, slot, plain, slotted) in ops {
                for _ in 0..plain {
                    q.push(Nanos(now + dt), n);
                    reference.push((now + dt, n, usize::MAX));
                    n += 1;
                }
                for k in 0..slotted {
                    let s = (slot + k) % 4;
                    prop_assert_eq!(
                        q.slot_pending(s).copied(),
                        reference.iter().find(|r| r.2 == s).map(|r| r.1)
                    );
                    let pending = reference.iter().any(|r| r.2 == s);
                    prop_assert_eq!(q.push_slot(Nanos(now + dt + k as u64), s, n), pending);
                    reference.retain(|r| r.2 != s);
                    reference.push((now + dt + k as u64, n, s));
                    n += 1;
                }
                reference.sort();
                let got = q.pop();
                let want = if reference.is_empty() { None } else { Some(reference.remove(0)) };
                prop_assert_eq!(got.map(|(t, i)| (t.0, i)), want.map(|r| (r.0, r.1)));
                if let Some(r) = want {
                    now = r.0;
                }
                prop_assert_eq!(q.len(), reference.len());
                prop_assert_eq!(q.peek_following().is_some(), !reference.is_empty());
            }
        }

        #[test]
        fn pops_in_time_then_sequence_order(times in proptest::collection::vec(0u64..50, 0..200)) {
            let mut q = EventQueue::new();
            for (i, t) in times.iter().enumerate() {
                q.push(Nanos(*t), i);
            }
            let mut last: Option<(Nanos, usize)> = None;
            while let Some((t, i)) = q.pop() {
                prop_assert_eq!(t.0, times[i]);
                if let Some((lt, li)) = last {
                    prop_assert!(lt < t || (lt == t && li < i));
                }
                last = Some((t, i));
            }
        }
    }
}
