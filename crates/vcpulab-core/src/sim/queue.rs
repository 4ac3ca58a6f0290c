//! The event queue: a binary min-heap ordered by (time, insertion sequence), so that
//! events at the same instant fire in the order they were scheduled — deterministic.
//! Cancellation is lazy: events carry their owner's generation and the dispatcher drops
//! those whose generation is stale.

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
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            seq: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, at: Nanos, ev: E) {
        let seq = self.seq;
        self.seq += 1;
        self.heap.push(Entry {
            key: ((at.0 as u128) << 64) | seq as u128,
            ev,
        });
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|e| (Nanos(e.time()), e.ev))
    }

    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|e| Nanos(e.time()))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
