//! How many slots each fragment should own, and which slots change hands:
//! the arithmetic behind adds, removals and reweighting.

/// Splits `total` slots in proportion to `weights` by largest remainder
/// (ties to the lower id), so the targets sum to `total` exactly. Every
/// positive weight gets at least one slot (taken from the largest target,
/// ties to the lower id); a weight of 0 gets none. `total` is at least the
/// number of weights (64 slots per fragment or more), so this always fits.
pub(crate) fn targets(weights: &[u32], total: u64) -> Vec<u64> {
    let w_sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if w_sum == 0 {
        return vec![0; weights.len()];
    }
    let mut out = Vec::with_capacity(weights.len());
    let mut rems = Vec::with_capacity(weights.len());
    for (i, &w) in weights.iter().enumerate() {
        let x = u128::from(total) * u128::from(w);
        out.push((x / w_sum) as u64);
        rems.push((x % w_sum, i));
    }
    let left = total - out.iter().sum::<u64>();
    rems.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rems.iter().take(left as usize) {
        out[i] += 1;
    }
    for (i, &w) in weights.iter().enumerate() {
        if w > 0 && out[i] == 0 {
            let largest = (0..out.len())
                .max_by(|&a, &b| out[a].cmp(&out[b]).then(b.cmp(&a)))
                .expect("non-empty");
            if out[largest] > 1 {
                out[largest] -= 1;
                out[i] = 1;
            }
        }
    }
    out
}

/// Takes `count` units one at a time from whichever entry of `excess` is
/// largest (ties to the lower index), never more than `caps[i]` from entry
/// `i`; returns how many each gave.
pub(super) fn greedy_take(excess: &[i64], caps: &[u64], count: u64) -> Vec<u64> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut heap: BinaryHeap<(i64, Reverse<usize>)> = excess
        .iter()
        .enumerate()
        .filter(|&(i, _)| caps[i] > 0)
        .map(|(i, &e)| (e, Reverse(i)))
        .collect();
    let mut taken = vec![0u64; excess.len()];
    let mut left = count;
    while left > 0 {
        let Some((e, Reverse(i))) = heap.pop() else {
            break;
        };
        taken[i] += 1;
        left -= 1;
        if taken[i] < caps[i] {
            heap.push((e - 1, Reverse(i)));
        }
    }
    taken
}

/// How many slots at the start of `t` belong to `owner`: whole blocks of
/// 16 first (a branch-free compare the compiler vectorises), then slot by
/// slot.
pub(super) fn run_len(t: &[u32], owner: u32) -> usize {
    const BLOCK: usize = 16;
    let mut i = 0;
    for block in t.chunks_exact(BLOCK) {
        if !block.iter().fold(true, |all, &x| all & (x == owner)) {
            break;
        }
        i += BLOCK;
    }
    i + t[i..]
        .iter()
        .position(|&x| x != owner)
        .unwrap_or(t.len() - i)
}

/// Chooses `count` slots from a fragment's runs: the tails of its longest
/// runs first, so what it gives away stays contiguous.
pub(super) fn take_from_runs(runs: &[(usize, usize)], mut count: u64) -> Vec<(usize, usize)> {
    let mut order: Vec<&(usize, usize)> = runs.iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out = Vec::new();
    for &&(start, len) in &order {
        if count == 0 {
            break;
        }
        let k = (count as usize).min(len);
        out.push((start + len - k, k));
        count -= k as u64;
    }
    out
}
