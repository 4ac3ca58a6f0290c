//! A time series with bounded memory: samples are offered with their index (epoch,
//! interval); at most `CAP` are kept. When full, every other kept sample is dropped and
//! from then on only every second index is kept (then every fourth, ...), so the series
//! still spans the whole run, evenly spaced, whatever its length.

/// Samples kept at most.
pub const CAP: usize = 2048;

#[derive(Clone, Debug)]
pub struct Thinned<T> {
    rows: Vec<(u64, T)>,
    /// Keep every `stride`-th index.
    stride: u64,
}

impl<T> Default for Thinned<T> {
    fn default() -> Self {
        Thinned {
            rows: Vec::new(),
            stride: 1,
        }
    }
}

impl<T> Thinned<T> {
    /// Offers the sample of index `index` (indices increase).
    pub fn offer(&mut self, index: u64, row: T) {
        if !index.is_multiple_of(self.stride) {
            return;
        }
        self.rows.push((index, row));
        if self.rows.len() >= CAP {
            self.stride *= 2;
            let s = self.stride;
            self.rows.retain(|(i, _)| i.is_multiple_of(s));
        }
    }

    /// Whether a sample of index `index` would be kept (to skip building it).
    pub fn wants(&self, index: u64) -> bool {
        index.is_multiple_of(self.stride)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.rows.iter().map(|(_, r)| r)
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_is_thinned_not_cut() {
        let mut s = Thinned::default();
        let n = 5 * CAP as u64;
        for i in 0..n {
            s.offer(i, i);
        }
        let kept: Vec<u64> = s.iter().copied().collect();
        assert!(kept.len() < CAP, "bounded: {}", kept.len());
        assert!(kept.len() >= CAP / 4);
        assert_eq!(kept[0], 0);
        assert!(*kept.last().unwrap_or(&0) >= n - 8, "spans the run");
        let d = kept[1] - kept[0];
        assert!(kept.windows(2).all(|w| w[1] - w[0] == d), "evenly spaced");
    }
}
