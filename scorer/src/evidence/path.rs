//! Pointer paths simplified in time as well as space, and the replay that draws them.

/// Ramer-Douglas-Peucker in time: a point is dropped when the position a replay would show at
/// its time (moving at constant speed between the kept points either side) is within
/// `tolerance` px of it. Unlike the spatial version, a pause or a change of speed along a
/// straight line is kept, so sub-movements survive. Endpoints are always kept.
pub fn simplify(points: &[[i64; 3]], tolerance: f64) -> Vec<[i64; 3]> {
    if points.len() <= 2 {
        return points.to_vec();
    }
    let mut keep = vec![false; points.len()];
    keep[0] = true;
    keep[points.len() - 1] = true;
    // An explicit stack: a 10-minute stroke has tens of thousands of points.
    let mut stack = vec![(0, points.len() - 1)];
    while let Some((first, last)) = stack.pop() {
        if last <= first + 1 {
            continue;
        }
        let (mut worst, mut worst_at) = (0.0, first);
        for (index, point) in points.iter().enumerate().take(last).skip(first + 1) {
            let distance = off_replay(points[first], points[last], *point);
            if distance > worst {
                (worst, worst_at) = (distance, index);
            }
        }
        if worst > tolerance {
            keep[worst_at] = true;
            stack.push((first, worst_at));
            stack.push((worst_at, last));
        }
    }
    points
        .iter()
        .zip(keep)
        .filter_map(|(point, kept)| kept.then_some(*point))
        .collect()
}

/// How far `point` is from where a replay between `from` and `to` shows the pointer at
/// `point`'s time (px).
pub fn off_replay(from: [i64; 3], to: [i64; 3], point: [i64; 3]) -> f64 {
    let span = (to[0] - from[0]) as f64;
    let share = if span > 0.0 {
        ((point[0] - from[0]) as f64 / span).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = from[1] as f64 + share * (to[1] - from[1]) as f64;
    let y = from[2] as f64 + share * (to[2] - from[2]) as f64;
    (point[1] as f64 - x).hypot(point[2] as f64 - y)
}

/// Where a replay of `points` (simplified or not) shows the pointer at time `t`.
pub fn replay_position(points: &[[i64; 3]], t: i64) -> Option<(f64, f64)> {
    let after = points.partition_point(|point| point[0] <= t);
    match (after.checked_sub(1).map(|i| points[i]), points.get(after)) {
        (Some(from), Some(to)) => {
            let share = (t - from[0]) as f64 / (to[0] - from[0]).max(1) as f64;
            Some((
                from[1] as f64 + share * (to[1] - from[1]) as f64,
                from[2] as f64 + share * (to[2] - from[2]) as f64,
            ))
        }
        (Some(last), None) => Some((last[1] as f64, last[2] as f64)),
        (None, Some(first)) => Some((first[1] as f64, first[2] as f64)),
        (None, None) => None,
    }
}
