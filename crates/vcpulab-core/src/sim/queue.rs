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

use super::Nanos;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// (time, seq) packed in one integer: time in the high half, so one comparison orders
/// by time, then by insertion.
struct Entry<E> {
    key: u128,
    ev: E,
}

impl<E> Entry<E> {
    #[inline]
    fn time(&self) -> u64 {
        (self.key >> 64) as u64
    }
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

pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    /// The root is the event `pop` last returned, not yet removed.
    root_popped: bool,
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
            seq: 0,
            root_popped: false,
        }
    }

    #[inline]
    pub fn push(&mut self, at: Nanos, ev: E) {
        let seq = self.seq;
        self.seq += 1;
        let e = Entry {
            key: ((at.0 as u128) << 64) | seq as u128,
            ev,
        };
        if self.root_popped {
            self.root_popped = false;
            if let Some(mut root) = self.heap.peek_mut() {
                *root = e; // sifted down when `root` drops
                return;
            }
        }
        self.heap.push(e);
    }

    /// Removes the root if `pop` returned it.
    #[inline]
    fn settle(&mut self) {
        if self.root_popped {
            self.root_popped = false;
            self.heap.pop();
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.settle();
        let e = self.heap.peek()?;
        let out = (Nanos(e.time()), e.ev);
        self.root_popped = true;
        Some(out)
    }

    /// The event most likely to come after the one `pop` just returned: the smaller of
    /// the root's children (a later push may still come first). A hint for prefetching,
    /// never for deciding anything.
    #[inline]
    pub fn peek_following(&self) -> Option<E> {
        if !self.root_popped {
            return None;
        }
        let h = self.heap.as_slice();
        // The heap is a max-heap of reversed keys: the larger entry is the earlier event.
        match (h.get(1), h.get(2)) {
            (Some(a), Some(b)) => Some(if a.key <= b.key { a.ev } else { b.ev }),
            (Some(a), None) => Some(a.ev),
            _ => None,
        }
    }

    pub fn peek_time(&mut self) -> Option<Nanos> {
        self.settle();
        self.heap.peek().map(|e| Nanos(e.time()))
    }

    pub fn len(&self) -> usize {
        self.heap.len() - self.root_popped as usize
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
