//! The iteration order of a CPython `set` of ints built by adds alone.
//!
//! The Python layer iterates two such sets where the order is observable: the nodes a
//! datagram touched (each one's nack timer may draw from the rng, in that order) and the
//! senders blocked on a node (they are released in that order). This replays CPython's
//! open addressing (`Objects/setobject.c`: linear probes of 9, perturbation shifted by
//! 5, the table grown fourfold once it is three fifths full) on the ints' hashes, so a
//! set built by the same adds iterates in the same order. The binding's tests check it
//! against real sets.

const LINEAR_PROBES: usize = 9;
const PERTURB_SHIFT: u32 = 5;
const MINSIZE: usize = 8;
const MODULUS: i128 = (1 << 61) - 1;

/// `hash(x)` of a Python int.
pub fn int_hash(x: i64) -> i64 {
    let x = x as i128;
    let h = if x >= 0 { x % MODULUS } else { -((-x) % MODULUS) };
    let h = h as i64;
    if h == -1 {
        -2
    } else {
        h
    }
}

#[derive(Clone, Debug)]
pub struct IntSet {
    table: Vec<Option<(i64, u64)>>,
    fill: usize,
}

impl Default for IntSet {
    fn default() -> Self {
        IntSet::new()
    }
}

impl IntSet {
    pub fn new() -> IntSet {
        IntSet { table: vec![None; MINSIZE], fill: 0 }
    }

    pub fn len(&self) -> usize {
        self.fill
    }

    pub fn is_empty(&self) -> bool {
        self.fill == 0
    }

    /// Where `key` lies, or the empty slot it would take.
    fn probe(table: &[Option<(i64, u64)>], key: Option<i64>, hash: u64) -> usize {
        let mask = table.len() - 1;
        let mut i = (hash as usize) & mask;
        let mut perturb = hash;
        loop {
            let probes = if i + LINEAR_PROBES <= mask { LINEAR_PROBES } else { 0 };
            for j in 0..=probes {
                match table[i + j] {
                    None => return i + j,
                    Some((k, _)) if Some(k) == key => return i + j,
                    _ => {}
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb as usize) & mask;
        }
    }

    pub fn add(&mut self, key: i64) {
        let hash = int_hash(key) as u64;
        let at = IntSet::probe(&self.table, Some(key), hash);
        if self.table[at].is_some() {
            return;
        }
        self.table[at] = Some((key, hash));
        self.fill += 1;
        let mask = self.table.len() - 1;
        if self.fill * 5 >= mask * 3 {
            let minused = if self.fill > 50000 { self.fill * 2 } else { self.fill * 4 };
            let mut size = MINSIZE;
            while size <= minused {
                size <<= 1;
            }
            let mut table = vec![None; size];
            for (k, h) in self.table.iter().flatten() {
                let at = IntSet::probe(&table, None, *h);
                table[at] = Some((*k, *h));
            }
            self.table = table;
        }
    }

    /// The members in CPython's iteration order.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.table.iter().flatten().map(|(k, _)| *k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ints_iterate_by_slot() {
        let mut s = IntSet::new();
        for x in [3, 1, 2] {
            s.add(x);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 2, 3]);
        s.add(2);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn collisions_probe_linearly() {
        // 9 and 1 share slot 1 of the first table: 9 goes to the next free slot
        let mut s = IntSet::new();
        s.add(9);
        s.add(1);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![9, 1]);
    }

    #[test]
    fn the_table_grows_at_three_fifths() {
        let mut s = IntSet::new();
        for x in [17, 1, 2, 3, 4] {
            s.add(x);
        }
        // grown to 32 slots: 17 has a slot of its own after the others
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 2, 3, 4, 17]);
    }

    #[test]
    fn hashes_of_negative_ints() {
        assert_eq!(int_hash(-1), -2);
        assert_eq!(int_hash(-2), -2);
        assert_eq!(int_hash((1 << 61) - 1), 0);
        assert_eq!(int_hash(i64::MIN), -4); // 2^63 = 4 (2^61 - 1) + 4
    }
}
