//! A map that iterates in insertion order, as a Python `dict` does: assigning to a key
//! present keeps its place, removing then inserting moves it to the end.

use std::collections::HashMap;
use std::hash::Hash;

#[derive(Clone, Debug)]
pub struct OrderedMap<K, V> {
    index: HashMap<K, usize>,
    slots: Vec<Option<(K, V)>>,
}

impl<K: Hash + Eq + Copy, V: Copy> Default for OrderedMap<K, V> {
    fn default() -> Self {
        OrderedMap::new()
    }
}

impl<K: Hash + Eq + Copy, V: Copy> OrderedMap<K, V> {
    pub fn new() -> Self {
        OrderedMap { index: HashMap::new(), slots: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn get(&self, key: &K) -> Option<V> {
        self.index.get(key).and_then(|&i| self.slots[i].map(|(_, v)| v))
    }

    pub fn contains(&self, key: &K) -> bool {
        self.index.contains_key(key)
    }

    pub fn insert(&mut self, key: K, value: V) {
        if let Some(&i) = self.index.get(&key) {
            self.slots[i] = Some((key, value));
        } else {
            self.index.insert(key, self.slots.len());
            self.slots.push(Some((key, value)));
        }
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.index.remove(key)?;
        let old = self.slots[i].take().map(|(_, v)| v);
        if self.index.is_empty() {
            self.slots.clear();
        } else if self.slots.len() > 32 && self.index.len() * 2 < self.slots.len() {
            self.compact();
        }
        old
    }

    fn compact(&mut self) {
        self.slots.retain(|s| s.is_some());
        for (i, slot) in self.slots.iter().enumerate() {
            if let Some((k, _)) = slot {
                self.index.insert(*k, i);
            }
        }
    }

    pub fn clear(&mut self) {
        self.index.clear();
        self.slots.clear();
    }

    pub fn iter(&self) -> impl Iterator<Item = (K, V)> + '_ {
        self.slots.iter().flatten().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_order_of_a_dict() {
        let mut m = OrderedMap::new();
        m.insert(3, 1.0);
        m.insert(1, 2.0);
        m.insert(3, 5.0);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![(3, 5.0), (1, 2.0)]);
        m.remove(&3);
        m.insert(3, 0.5);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![(1, 2.0), (3, 0.5)]);
        for k in 10..100 {
            m.insert(k, k as f64);
        }
        for k in 10..90 {
            m.remove(&k);
        }
        let keys: Vec<i32> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(keys[..2], [1, 3]);
        assert_eq!(keys.len(), 12);
        assert_eq!(m.get(&95), Some(95.0));
    }
}
