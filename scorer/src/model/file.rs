//! The model file's parts as JSON: bands, terms and their transforms, trees, deviations and
//! the evidence each input modality needs before its trees speak.

use serde::{Deserialize, Serialize};

/// Score thresholds of the bands (DESIGN.md: below 30, 30 to below 70, from 70).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bands {
    pub review_from: f64,
    pub human_from: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Term {
    pub feature: String,
    pub weight: f64,
    pub transform: Transform,
}

/// Maps a feature's value to a bounded signal before it is weighted.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Transform {
    /// The value itself, for 0/1 features.
    Indicator,
    /// How far the value is above `from`, in units of `scale`, between 0 and `max`.
    Above { from: f64, scale: f64, max: f64 },
    /// How far the value is below `from`, in units of `scale`, between 0 and `max`.
    Below { from: f64, scale: f64, max: f64 },
    /// 1 inside `[low, high]`, else 0.
    Within { low: f64, high: f64 },
    /// `log10(1 + value)` divided by `scale`, at most `max`.
    Log { scale: f64, max: f64 },
    /// 1 inside the half-open `[low, high)`, else 0; a missing bound is unbounded. Adjacent
    /// bins of a scorecard share their edges, so every value falls in exactly one.
    Bin {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        low: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        high: Option<f64>,
    },
}

impl Transform {
    pub(super) fn apply(self, value: f64) -> f64 {
        match self {
            Transform::Indicator => value.clamp(0.0, 1.0),
            Transform::Above { from, scale, max } => ((value - from) / scale).clamp(0.0, max),
            Transform::Below { from, scale, max } => ((from - value) / scale).clamp(0.0, max),
            Transform::Within { low, high } => {
                if (low..=high).contains(&value) {
                    1.0
                } else {
                    0.0
                }
            }
            Transform::Log { scale, max } => ((1.0 + value.max(0.0)).log10() / scale).min(max),
            Transform::Bin { low, high } => {
                let above_low = low.is_none_or(|low| value >= low);
                let below_high = high.is_none_or(|high| value < high);
                if above_low && below_high { 1.0 } else { 0.0 }
            }
        }
    }
}

/// `|value - centre| / scale` of one feature, for splits with `deviation: true`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deviation {
    pub feature: String,
    pub centre: f64,
    pub scale: f64,
}

/// One regression tree: `nodes[0]` is the root.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tree {
    pub nodes: Vec<Node>,
    /// The input modality whose features the tree reads (an entry of the model's `evidence`):
    /// the tree speaks only for a session with enough of that behaviour. `None`: always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modality: Option<String>,
}

/// A split or a leaf. A split sends `value <= threshold` left, greater values right, and an
/// unmeasured value (NaN) as its `missing` says. `value` is the node's expected output (the
/// mean of its leaves over the training data, weighted by `cover`), which the per-feature
/// contributions are built from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Node {
    Split {
        feature: String,
        threshold: f64,
        missing: Side,
        left: usize,
        right: usize,
        value: f64,
        /// The split looks at the feature's deviation (the model's `deviations`), not its value.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        deviation: bool,
        /// Training weight that reached the node (what `missing: average` weighs sides by).
        #[serde(default, skip_serializing_if = "is_zero")]
        cover: f64,
    },
    Leaf {
        leaf: f64,
        #[serde(default, skip_serializing_if = "is_zero")]
        cover: f64,
    },
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// Where a split sends an unmeasured value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Left,
    Right,
    /// Both ways, each weighed by the training cover that went there: the tree's expected value
    /// over what the feature might have been, so an unmeasured feature moves the score neither
    /// way and is charged nothing.
    Average,
}

impl Node {
    pub(super) fn value(&self) -> f64 {
        match self {
            Node::Split { value, .. } => *value,
            Node::Leaf { leaf, .. } => *leaf,
        }
    }

    pub(super) fn cover(&self) -> f64 {
        match self {
            Node::Split { cover, .. } | Node::Leaf { cover, .. } => *cover,
        }
    }
}

/// How much of one input modality a session must show for that modality's trees to speak,
/// and whether enough of it can make a session `human-like`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// The name trees refer to (`pointer`, `keyboard`, `touch`).
    pub modality: String,
    /// Count features whose sum measures the behaviour (aimed movements; taps and swipes).
    pub features: Vec<String>,
    pub minimum: f64,
    /// How a reason names the amount: `aimed pointer movements`.
    pub label: String,
    /// Enough of this modality is evidence a session may be called human-like on. Keystroke
    /// timing alone is not: a recorded person's key timings replay onto any page unchanged.
    pub sufficient: bool,
    /// The least of this modality a `sufficient` one needs before it may make a session
    /// human-like, above `minimum` (from which its trees speak): a session with only the
    /// minimum is held at review. Absent: `minimum` (model files before telltale-v5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_minimum: Option<f64>,
}

impl Evidence {
    /// How much of the modality lets it decide a session is human-like.
    pub fn decides_from(&self) -> f64 {
        self.human_minimum.unwrap_or(self.minimum).max(self.minimum)
    }
}

/// Where the TRAIN humans' values of one feature lie, for a reviewer to place a session's value
/// among them: the feature's quantiles at evenly spaced probabilities (the first at 0, the last
/// at 1) over the TRAIN human sessions that measured it. Aggregates only, no session's values.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HumanRange {
    pub feature: String,
    /// TRAIN human sessions the quantiles are taken over.
    pub sessions: u64,
    pub quantiles: Vec<f64>,
}

/// The TRAIN people's values of some features, one row a session (`null` where a session did
/// not measure one): the cohort's people test ([`crate::cohort`]) places each row as it places a
/// session and counts how many people are alike with a session, so how often people resemble
/// each other is read off people, with their correlations across features, not assumed.
/// Aggregates of a session each, as `human_ranges`' quantiles are: no event, key or path.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CohortReference {
    pub features: Vec<String>,
    pub sessions: Vec<Vec<Option<f64>>>,
}

impl CohortReference {
    pub(super) fn check(&self) -> Result<(), &'static str> {
        if self
            .features
            .iter()
            .enumerate()
            .any(|(i, name)| self.features[..i].contains(name))
        {
            return Err("a feature is named twice");
        }
        if self
            .sessions
            .iter()
            .any(|row| row.len() != self.features.len())
        {
            return Err("a session's row does not have one value per feature");
        }
        if self
            .sessions
            .iter()
            .flatten()
            .flatten()
            .any(|v| !v.is_finite())
        {
            return Err("a value is not finite");
        }
        Ok(())
    }
}

impl HumanRange {
    pub(super) fn check(&self) -> Result<(), &'static str> {
        if self.quantiles.len() < 2 {
            return Err("fewer than two quantiles");
        }
        if self.quantiles.iter().any(|q| !q.is_finite()) {
            return Err("a quantile is not finite");
        }
        if self.quantiles.windows(2).any(|pair| pair[1] < pair[0]) {
            return Err("quantiles must not decrease");
        }
        Ok(())
    }

    /// The percentile (0-100) of `value` among the TRAIN humans, by linear interpolation between
    /// the quantiles; a value equal to a run of equal quantiles sits in the run's middle. `None`
    /// for an unmeasured (NaN) value.
    pub fn percentile(&self, value: f64) -> Option<f64> {
        if value.is_nan() {
            return None;
        }
        let q = &self.quantiles;
        let steps = (q.len() - 1) as f64;
        let below = q.partition_point(|&x| x < value);
        let equal = q[below..].partition_point(|&x| x <= value);
        let position = if equal > 0 {
            below as f64 + (equal - 1) as f64 / 2.0
        } else if below == 0 {
            0.0
        } else if below == q.len() {
            steps
        } else {
            let (low, high) = (q[below - 1], q[below]);
            (below - 1) as f64 + (value - low) / (high - low)
        };
        Some(position / steps * 100.0)
    }
}

/// A tree checks out when every node but the root has exactly one parent whose index is smaller
/// (so a walk from the root always ends at a leaf) and every child index is in range.
pub(super) fn check_tree(tree: &Tree) -> Result<(), &'static str> {
    if tree.nodes.is_empty() {
        return Err("no nodes");
    }
    let mut parents = vec![0usize; tree.nodes.len()];
    for (index, node) in tree.nodes.iter().enumerate() {
        if !node.cover().is_finite() || node.cover() < 0.0 {
            return Err("a cover is negative or not finite");
        }
        if let Node::Split {
            left,
            right,
            threshold,
            value,
            ..
        } = node
        {
            if threshold.is_nan() {
                return Err("a threshold is NaN");
            }
            if !value.is_finite() {
                return Err("a split value is not finite");
            }
            for &child in [left, right] {
                if child >= tree.nodes.len() || child <= index {
                    return Err("a child index is out of range or points backwards");
                }
                parents[child] += 1;
            }
        } else if !node.value().is_finite() {
            return Err("a leaf is not finite");
        }
    }
    if parents[0] != 0 || parents[1..].iter().any(|&count| count != 1) {
        return Err("a node has no parent or more than one");
    }
    Ok(())
}
