//! The scoring model: a versioned JSON file of weighted feature transforms and, optionally, an
//! ensemble of regression trees.
//!
//! The score is `100 · sigmoid(bias + Σ weight · transform(feature) + Σ tree(features))`. Each
//! term is a contribution a person can read (`webdriver=1 (-8.00)`). Trees are split into
//! per-feature contributions along the path each session takes (Saabas's decomposition: every
//! split is charged the change of the expected value it makes), so the contributions of terms and
//! trees add up to the score's log-odds exactly, and the largest per-feature sums are the reasons
//! given with a score. A feature that was not measured contributes nothing through a term, and
//! follows its split's `missing` side in a tree.
//!
//! A split may look at a feature's *deviation* instead of its value: `|value - centre| / scale`
//! with the centre and scale of the model's `deviations` table (the TRAIN humans' median and
//! interquartile range). The harness constrains the trees to score larger deviations as no more
//! human, so a kind of automation unlike anything in training, far from people on one axis, is
//! not waved through because trees extrapolate flat beyond the data they saw.

use serde::{Deserialize, Serialize};

use crate::features::Features;

/// The model shipped with the binary; `modelVersion` is its `version`.
pub const DEFAULT_MODEL_JSON: &str = include_str!("../models/telltale-v3.json");

/// The hand-set model that preceded training (weights chosen from what each feature means, no
/// bias): tests of features and of how tells move a score use it, since its terms are fixed by
/// design rather than by the latest training data.
pub const HAND_SET_MODEL_JSON: &str = include_str!("../models/telltale-v1.json");

/// How many reasons a score carries.
pub const REASONS_PER_SCORE: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model file is not valid: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("model names an unknown feature {0:?}")]
    UnknownFeature(String),
    #[error("model bands must satisfy 0 <= review_from <= human_from <= 100")]
    Bands,
    #[error("a split looks at the deviation of {0:?}, which has no positive scale in `deviations`")]
    Deviation(String),
    #[error("tree {0} is not a tree: {1}")]
    Tree(usize, &'static str),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Names the exact model file: reported as `modelVersion` with every score.
    pub version: String,
    pub description: String,
    pub bias: f64,
    pub bands: Bands,
    pub terms: Vec<Term>,
    /// Regression trees whose leaves add to the log-odds (gradient-boosted, fitted by the
    /// quality harness); none in the linear models v1 and v2.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trees: Vec<Tree>,
    /// Centre and scale of the features whose deviation a split may look at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deviations: Vec<Deviation>,
    /// Feature index of each term and of each split, resolved once when the file is read.
    #[serde(skip)]
    resolved: Resolved,
}

#[derive(Debug, Clone, Default)]
struct Resolved {
    terms: Vec<usize>,
    /// Every tree's nodes laid out for the walk in [`Model::score`], tree after tree.
    steps: Vec<Step>,
    /// The trees in groups of [`LANES`], walked side by side.
    groups: Vec<Group>,
    /// The deepest group's depth.
    max_depth: usize,
    /// Every feature some split looks at, once.
    tree_features: Vec<usize>,
    /// Feature index of each entry of `deviations`.
    deviations: Vec<usize>,
}

/// A tree node as the walk reads it. Its two branches' effects (the child's value minus the
/// node's) are computed when the model is read, and a leaf branches to itself with no effect:
/// every walk takes a fixed number of steps, with no exit that depends on the data.
#[derive(Debug, Clone, Copy)]
struct Step {
    threshold: f64,
    /// Effect of going left, right.
    effects: [f64; 2],
    /// Indexes into [`Resolved::steps`] of the left and right child.
    children: [u32; 2],
    /// Index of the value the split reads in [`Model::split_values`]: a feature's own index,
    /// or `Features::NAMES.len()` plus the position of its deviation.
    read: u32,
    /// The feature a branch's effect is charged to (a deviation's feature for a deviation).
    feature: u32,
    missing_left: bool,
}

impl Step {
    /// A leaf at `index` of [`Resolved::steps`]: both branches lead back to it, adding nothing.
    fn leaf(index: u32) -> Step {
        Step {
            threshold: 0.0,
            effects: [0.0, 0.0],
            children: [index, index],
            read: 0,
            feature: 0,
            missing_left: false,
        }
    }
}

/// Trees walked side by side: one walk is a chain of dependent loads (node, value, compare,
/// child), so [`LANES`] independent chains in one loop keep the core busy where one would
/// leave it waiting. Scores are the same, bit for bit, as walking the trees one by one over
/// [`Tree::nodes`]: the effects are added up afterwards tree by tree in the same order (plus
/// zeros). benches/README.md (model_score) has the times.
#[derive(Debug, Clone, Copy)]
struct Group {
    /// Indexes into [`Resolved::steps`] of the trees' roots; a lane past the last tree starts
    /// at a leaf with no value.
    roots: [u32; LANES],
    root_values: [f64; LANES],
    /// Splits on the longest path from a root.
    depth: usize,
}

/// Trees per [`Group`].
const LANES: usize = 8;

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
}

/// A split or a leaf. A split sends `value <= threshold` left, greater values right, and an
/// unmeasured value (NaN) to its `missing` side. `value` is the split's expected output (the
/// mean of its leaves over the training data), which the per-feature contributions are built
/// from.
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
    },
    Leaf {
        leaf: f64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Left,
    Right,
}

impl Node {
    fn value(&self) -> f64 {
        match self {
            Node::Split { value, .. } => *value,
            Node::Leaf { leaf } => *leaf,
        }
    }
}

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
    fn apply(self, value: f64) -> f64 {
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

/// One feature's part in a score.
#[derive(Debug, Clone, PartialEq)]
pub struct Contribution {
    pub feature: &'static str,
    pub value: f64,
    pub effect: f64,
}

impl Contribution {
    /// `feature=value (effect)`, e.g. `webdriver=1 (-8.00)`.
    pub fn describe(&self) -> String {
        format!(
            "{}={} ({:+.2})",
            self.feature,
            trim(self.value),
            self.effect
        )
    }
}

fn trim(value: f64) -> String {
    if value.is_nan() {
        // A tree's split on a feature the session gave no evidence for.
        "unmeasured".to_owned()
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub human_score_percent: f64,
    pub band: &'static str,
    /// The largest contributions by magnitude, most important first.
    pub reasons: Vec<Contribution>,
}

pub const BAND_AUTOMATION: &str = "automation-like";
pub const BAND_REVIEW: &str = "review";
pub const BAND_HUMAN: &str = "human-like";

impl Model {
    pub fn default_model() -> Result<Model, ModelError> {
        Model::from_json(DEFAULT_MODEL_JSON)
    }

    /// Parses and checks a model file.
    pub fn from_json(json: &str) -> Result<Model, ModelError> {
        let mut model: Model = serde_json::from_str(json)?;
        let index = |name: &str| {
            Features::NAMES
                .iter()
                .position(|known| *known == name)
                .ok_or_else(|| ModelError::UnknownFeature(name.to_owned()))
        };
        model.resolved.terms = model
            .terms
            .iter()
            .map(|term| index(&term.feature))
            .collect::<Result<_, _>>()?;
        model.resolved.deviations = model
            .deviations
            .iter()
            .map(|deviation| index(&deviation.feature))
            .collect::<Result<_, _>>()?;
        let mut walks = Vec::with_capacity(model.trees.len());
        for (number, tree) in model.trees.iter().enumerate() {
            check_tree(tree).map_err(|why| ModelError::Tree(number, why))?;
            let base = model.resolved.steps.len();
            let index_of = |node: usize| {
                u32::try_from(base + node).map_err(|_| ModelError::Tree(number, "too many nodes"))
            };
            // A node's parent has a smaller index (check_tree), so one pass in order finds
            // every node's depth.
            let mut depths = vec![0u32; tree.nodes.len()];
            for (position, node) in tree.nodes.iter().enumerate() {
                let Node::Split {
                    feature,
                    threshold,
                    missing,
                    left,
                    right,
                    value,
                    deviation,
                } = node
                else {
                    model.resolved.steps.push(Step::leaf(index_of(position)?));
                    continue;
                };
                let own = index(feature)?;
                if !model.resolved.tree_features.contains(&own) {
                    model.resolved.tree_features.push(own);
                }
                let read = if *deviation {
                    let position = model
                        .deviations
                        .iter()
                        .position(|d| {
                            d.feature == *feature && d.scale > 0.0 && d.centre.is_finite()
                        })
                        .ok_or_else(|| ModelError::Deviation(feature.clone()))?;
                    Features::NAMES.len() + position
                } else {
                    own
                };
                for child in [*left, *right] {
                    depths[child] = depths[position] + 1;
                }
                model.resolved.steps.push(Step {
                    threshold: *threshold,
                    effects: [
                        tree.nodes[*left].value() - value,
                        tree.nodes[*right].value() - value,
                    ],
                    children: [index_of(*left)?, index_of(*right)?],
                    // Both fit: there are fewer features and deviations than u32::MAX.
                    read: read as u32,
                    feature: own as u32,
                    missing_left: *missing == Side::Left,
                });
            }
            walks.push((
                index_of(0)?,
                depths.iter().copied().max().unwrap_or(0) as usize,
                tree.nodes[0].value(),
            ));
        }
        if walks.len() % LANES != 0 {
            // Lanes past the last tree: a leaf that adds nothing.
            let nothing = u32::try_from(model.resolved.steps.len())
                .map_err(|_| ModelError::Tree(model.trees.len(), "too many nodes"))?;
            model.resolved.steps.push(Step::leaf(nothing));
            walks.resize(walks.len().next_multiple_of(LANES), (nothing, 0, 0.0));
        }
        for lanes in walks.chunks(LANES) {
            let mut group = Group {
                roots: [0; LANES],
                root_values: [0.0; LANES],
                depth: 0,
            };
            for (lane, &(root, depth, value)) in lanes.iter().enumerate() {
                group.roots[lane] = root;
                group.root_values[lane] = value;
                group.depth = group.depth.max(depth);
            }
            model.resolved.max_depth = model.resolved.max_depth.max(group.depth);
            model.resolved.groups.push(group);
        }
        let Bands {
            review_from,
            human_from,
        } = model.bands;
        if !(0.0..=100.0).contains(&review_from)
            || !(0.0..=100.0).contains(&human_from)
            || review_from > human_from
        {
            return Err(ModelError::Bands);
        }
        Ok(model)
    }

    pub fn band(&self, percent: f64) -> &'static str {
        if percent < self.bands.review_from {
            BAND_AUTOMATION
        } else if percent < self.bands.human_from {
            BAND_REVIEW
        } else {
            BAND_HUMAN
        }
    }

    /// The features' values followed by the deviations the model's splits may read.
    fn split_values(&self, values: &[f64]) -> Vec<f64> {
        let mut all = Vec::with_capacity(values.len() + self.deviations.len());
        all.extend_from_slice(values);
        for (deviation, &feature) in self.deviations.iter().zip(&self.resolved.deviations) {
            // NaN stays NaN: an unmeasured feature has no deviation either.
            all.push((values[feature] - deviation.centre).abs() / deviation.scale);
        }
        all
    }

    /// Adds every tree's value for `split_values` to `z`, and each branch's effect to its
    /// feature's entry of `effects`.
    fn walk_trees(&self, split_values: &[f64], z: &mut f64, effects: &mut [f64]) {
        let steps = &self.resolved.steps;
        // Each lane's (effect, feature) at each level, added up once the group is walked.
        let stride = self.resolved.max_depth;
        let mut trail = vec![(0.0, 0u32); LANES * stride];
        for group in &self.resolved.groups {
            let mut nodes = group.roots.map(|root| root as usize);
            for level in 0..group.depth {
                for (lane, node) in nodes.iter_mut().enumerate() {
                    let step = &steps[*node];
                    let value = split_values[step.read as usize];
                    // An unmeasured value (NaN compares false) takes the split's missing side.
                    let left = (value <= step.threshold) | (value.is_nan() & step.missing_left);
                    let side = usize::from(!left);
                    trail[lane * stride + level] = (step.effects[side], step.feature);
                    *node = step.children[side] as usize;
                }
            }
            for (lane, root_value) in group.root_values.iter().enumerate() {
                // The root's value is what the tree adds before any split: no feature's doing.
                *z += root_value;
                for &(effect, feature) in &trail[lane * stride..lane * stride + group.depth] {
                    *z += effect;
                    effects[feature as usize] += effect;
                }
            }
        }
    }

    pub fn score(&self, features: &Features) -> Score {
        let values = features.values();
        let split_values = self.split_values(&values);
        // Per-feature sums of the terms' and the splits' effects.
        let mut effects = vec![0.0; values.len()];
        let mut z = self.bias;
        for (term, &feature) in self.terms.iter().zip(&self.resolved.terms) {
            let value = values[feature];
            if !value.is_finite() {
                continue;
            }
            let effect = term.weight * term.transform.apply(value);
            z += effect;
            effects[feature] += effect;
        }
        // The trees speak only about behaviour they can see. A session none of whose tree
        // features was measured (no pointing, no typing, no input at all: a page submitted by
        // script) is outside anything they were fitted on, where the missing-value sides they
        // learnt would say whatever the training sessions with gaps said; it keeps the bias and
        // the terms alone.
        let evidence = self
            .resolved
            .tree_features
            .iter()
            .any(|&feature| !values[feature].is_nan());
        if evidence {
            self.walk_trees(&split_values, &mut z, &mut effects);
        }
        let mut contributions: Vec<Contribution> = effects
            .iter()
            .enumerate()
            .filter(|(_, effect)| **effect != 0.0)
            .map(|(feature, effect)| Contribution {
                feature: Features::NAMES[feature],
                value: values[feature],
                effect: *effect,
            })
            .collect();
        contributions.sort_by(|a, b| b.effect.abs().total_cmp(&a.effect.abs()));
        contributions.truncate(REASONS_PER_SCORE);
        // Two decimals: the score is read by people and compared against band thresholds.
        let percent = (100.0 / (1.0 + (-z).exp()) * 100.0).round() / 100.0;
        Score {
            human_score_percent: percent,
            band: self.band(percent),
            reasons: contributions,
        }
    }
}

/// A tree is well formed when every node but the root has exactly one parent whose index is
/// smaller (so a walk from the root always ends at a leaf) and every child index is in range.
fn check_tree(tree: &Tree) -> Result<(), &'static str> {
    if tree.nodes.is_empty() {
        return Err("no nodes");
    }
    let mut parents = vec![0usize; tree.nodes.len()];
    for (index, node) in tree.nodes.iter().enumerate() {
        if let Node::Split {
            left,
            right,
            threshold,
            value,
            ..
        } = node
        {
            if !threshold.is_finite() && !threshold.is_infinite() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_model_loads_and_uses_the_documented_bands() {
        let model = Model::default_model().expect("built-in model");
        assert_eq!(model.version, "telltale-v3");
        assert_eq!(model.band(29.99), BAND_AUTOMATION);
        assert_eq!(model.band(30.0), BAND_REVIEW);
        assert_eq!(model.band(69.99), BAND_REVIEW);
        assert_eq!(model.band(70.0), BAND_HUMAN);
        assert_eq!(
            (model.bands.review_from, model.bands.human_from),
            (30.0, 70.0),
            "training never moves the bands"
        );
    }

    #[test]
    fn scorecard_bins_are_half_open_so_each_value_falls_in_exactly_one() {
        let bins = [
            Transform::Bin {
                low: None,
                high: Some(0.5),
            },
            Transform::Bin {
                low: Some(0.5),
                high: Some(1.25),
            },
            Transform::Bin {
                low: Some(1.25),
                high: None,
            },
        ];
        for value in [-1e300, 0.0, 0.4999, 0.5, 1.0, 1.25, 7.0, 1e300] {
            let hits: f64 = bins.iter().map(|bin| bin.apply(value)).sum();
            assert_eq!(hits, 1.0, "{value}");
        }
        let parsed: Transform =
            serde_json::from_str(r#"{"kind":"bin","low":0.5}"#).expect("a bin without high");
        assert_eq!(parsed.apply(0.5), 1.0);
        assert_eq!(parsed.apply(0.49), 0.0);
    }

    #[test]
    fn under_the_trained_model_no_evidence_scores_its_bias() {
        let model = Model::default_model().expect("model");
        assert!(!model.trees.is_empty());
        let score = model.score(&Features::unmeasured());
        let expected = (100.0 / (1.0 + (-model.bias).exp()) * 100.0).round() / 100.0;
        assert_eq!(score.human_score_percent, expected);
        assert_eq!(score.band, BAND_REVIEW, "no evidence is not a verdict");
        assert!(score.reasons.is_empty());
        // One measured tree feature is evidence: the trees speak again.
        let mut features = Features::unmeasured();
        features.key_flight_mean_ms = 180.0;
        features.key_hold_mean_ms = 95.0;
        assert!(!model.score(&features).reasons.is_empty());
    }

    #[test]
    fn no_evidence_scores_the_middle_of_review_under_the_hand_set_model() {
        let model = Model::from_json(HAND_SET_MODEL_JSON).expect("model");
        let score = model.score(&Features::unmeasured());
        assert_eq!(score.human_score_percent, 50.0);
        assert_eq!(score.band, BAND_REVIEW);
        assert!(score.reasons.is_empty());
    }

    #[test]
    fn contributions_add_up_and_rank_by_size() {
        let model = Model::from_json(
            r#"{"version":"t","description":"","bias":0.5,
                "bands":{"review_from":30,"human_from":70},
                "terms":[
                  {"feature":"webdriver","weight":-4,"transform":{"kind":"indicator"}},
                  {"feature":"pauses","weight":1,"transform":{"kind":"above","from":0,"scale":2,"max":1}}
                ]}"#,
        )
        .expect("model");
        let mut features = Features::unmeasured();
        features.webdriver = 1.0;
        features.pauses = 1.0;
        let score = model.score(&features);
        let z: f64 = 0.5 - 4.0 + 0.5;
        let expected = (100.0 / (1.0 + (-z).exp()) * 100.0).round() / 100.0;
        assert_eq!(score.human_score_percent, expected);
        assert_eq!(score.reasons[0].feature, "webdriver");
        assert_eq!(score.reasons[0].describe(), "webdriver=1 (-4.00)");
        assert_eq!(score.reasons[1].feature, "pauses");
    }

    /// A model of one term and one tree: `pauses <= 2` (unmeasured goes right), then
    /// `webdriver <= 0.5` on the left.
    const TREE_MODEL: &str = r#"{"version":"t","description":"","bias":0.25,
        "bands":{"review_from":30,"human_from":70},
        "terms":[{"feature":"key_hold_cv","weight":-1,"transform":{"kind":"below","from":0.1,"scale":0.05,"max":2}}],
        "trees":[{"nodes":[
          {"feature":"pauses","threshold":2,"missing":"right","left":1,"right":2,"value":0.5},
          {"feature":"webdriver","threshold":0.5,"missing":"left","left":3,"right":4,"value":-0.5},
          {"leaf":1.5},
          {"leaf":0.5},
          {"leaf":-3}
        ]}]}"#;

    fn percent(z: f64) -> f64 {
        (100.0 / (1.0 + (-z).exp()) * 100.0).round() / 100.0
    }

    #[test]
    fn trees_add_their_leaf_and_charge_each_split_to_its_feature() {
        let model = Model::from_json(TREE_MODEL).expect("model");
        let mut features = Features::unmeasured();
        features.pauses = 1.0;
        features.webdriver = 1.0;
        features.key_hold_cv = 0.0;
        let score = model.score(&features);
        // bias + term (-1 * 2) + leaf -3.
        assert_eq!(score.human_score_percent, percent(0.25 - 2.0 - 3.0));
        let effect = |name: &str| {
            score
                .reasons
                .iter()
                .find(|r| r.feature == name)
                .map(|r| r.effect)
        };
        // Root 0.5 -> split node -0.5 (pauses: -1) -> leaf -3 (webdriver: -2.5).
        assert_eq!(effect("webdriver"), Some(-2.5));
        assert_eq!(effect("key_hold_cv"), Some(-2.0));
        assert_eq!(effect("pauses"), Some(-1.0));
        assert_eq!(score.reasons[0].describe(), "webdriver=1 (-2.50)");
        let total: f64 = score.reasons.iter().map(|r| r.effect).sum();
        assert_eq!(percent(0.25 + 0.5 + total), score.human_score_percent);

        // Unmeasured values follow their split's missing side.
        features.pauses = f64::NAN;
        features.key_hold_cv = f64::NAN;
        let score = model.score(&features);
        assert_eq!(score.human_score_percent, percent(0.25 + 1.5));
        assert_eq!(score.reasons[0].describe(), "pauses=unmeasured (+1.00)");
        // With none of the trees' features measured, the trees say nothing.
        let score = model.score(&Features::unmeasured());
        assert_eq!(score.human_score_percent, percent(0.25));
        assert!(score.reasons.is_empty());
        let mut left = Features::unmeasured();
        left.pauses = 2.0; // the threshold itself goes left; unmeasured webdriver goes left too
        assert_eq!(model.score(&left).human_score_percent, percent(0.75));
    }

    #[test]
    fn a_split_may_read_a_deviation_charged_to_its_feature() {
        // pauses deviates from 10 by |pauses - 10| / 4; at most 1 goes left (+1), more right (-2).
        let model = Model::from_json(
            r#"{"version":"t","description":"","bias":0,
            "bands":{"review_from":30,"human_from":70},"terms":[],
            "deviations":[{"feature":"pauses","centre":10,"scale":4}],
            "trees":[{"nodes":[
              {"feature":"pauses","deviation":true,"threshold":1,"missing":"left","left":1,"right":2,"value":0},
              {"leaf":1},
              {"leaf":-2}
            ]}]}"#,
        )
        .expect("model");
        let with = |pauses: f64| {
            let mut features = Features::unmeasured();
            features.pauses = pauses;
            model.score(&features)
        };
        assert_eq!(with(13.0).human_score_percent, percent(1.0));
        assert_eq!(with(6.0).human_score_percent, percent(1.0));
        let far = with(30.0);
        assert_eq!(far.human_score_percent, percent(-2.0));
        assert_eq!(far.reasons[0].describe(), "pauses=30 (-2.00)");
        assert_eq!(with(-10.0).human_score_percent, percent(-2.0));

        // A deviation the table lacks, or one without a positive scale, is refused.
        for table in [r#"[]"#, r#"[{"feature":"pauses","centre":10,"scale":0}]"#] {
            let json = format!(
                r#"{{"version":"t","description":"","bias":0,
                "bands":{{"review_from":30,"human_from":70}},"terms":[],"deviations":{table},
                "trees":[{{"nodes":[
                  {{"feature":"pauses","deviation":true,"threshold":1,"missing":"left","left":1,"right":2,"value":0}},
                  {{"leaf":1}},{{"leaf":-2}}]}}]}}"#
            );
            assert!(matches!(
                Model::from_json(&json),
                Err(ModelError::Deviation(_))
            ));
        }
    }

    /// The laid-out walk adds what a walk over the nodes adds, bit for bit, on the built-in
    /// model's 300 trees and random values (a fifth unmeasured, some exactly at a threshold).
    #[test]
    fn the_laid_out_walk_adds_what_a_walk_over_the_nodes_adds() {
        let model = Model::default_model().expect("model");
        assert!(model.trees.len() >= 100, "the built-in model has trees");
        let thresholds: Vec<f64> = model
            .trees
            .iter()
            .flat_map(|tree| &tree.nodes)
            .filter_map(|node| match node {
                Node::Split { threshold, .. } => Some(*threshold),
                Node::Leaf { .. } => None,
            })
            .collect();
        let mut rng = crate::synthetic::Rng::new(3);
        for _ in 0..3000 {
            let values: Vec<f64> = Features::NAMES
                .iter()
                .map(|_| match rng.next_u64() % 10 {
                    0 | 1 => f64::NAN,
                    2 => thresholds[rng.next_u64() as usize % thresholds.len()],
                    _ => rng.lognormal(1.0, 2.0) - 0.5,
                })
                .collect();
            let split_values = model.split_values(&values);
            let (mut z, mut effects) = (0.125, vec![0.0; values.len()]);
            model.walk_trees(&split_values, &mut z, &mut effects);

            let (mut expected_z, mut expected) = (0.125, vec![0.0; values.len()]);
            for tree in &model.trees {
                let mut node = 0;
                expected_z += tree.nodes[0].value();
                while let Node::Split {
                    feature,
                    threshold,
                    missing,
                    left,
                    right,
                    deviation,
                    ..
                } = &tree.nodes[node]
                {
                    let own = Features::NAMES
                        .iter()
                        .position(|name| name == feature)
                        .expect("known feature");
                    let read = if *deviation {
                        let position = model
                            .deviations
                            .iter()
                            .position(|d| d.feature == *feature)
                            .expect("deviation");
                        Features::NAMES.len() + position
                    } else {
                        own
                    };
                    let value = split_values[read];
                    let go_left = if value.is_nan() {
                        *missing == Side::Left
                    } else {
                        value <= *threshold
                    };
                    let next = if go_left { *left } else { *right };
                    let effect = tree.nodes[next].value() - tree.nodes[node].value();
                    expected_z += effect;
                    expected[own] += effect;
                    node = next;
                }
            }
            assert_eq!(z.to_bits(), expected_z.to_bits(), "{values:?}");
            assert_eq!(effects, expected, "{values:?}");
        }
    }

    #[test]
    fn malformed_trees_are_refused() {
        let with_nodes = |nodes: &str| {
            format!(
                r#"{{"version":"t","description":"","bias":0,
                "bands":{{"review_from":30,"human_from":70}},"terms":[],
                "trees":[{{"nodes":[{nodes}]}}]}}"#
            )
        };
        let split = |left: usize, right: usize| {
            format!(
                r#"{{"feature":"pauses","threshold":1,"missing":"left","left":{left},"right":{right},"value":0}}"#
            )
        };
        for nodes in [
            String::new(),
            format!(r#"{},{{"leaf":1}}"#, split(1, 2)),
            format!(r#"{},{{"leaf":1}},{{"leaf":1}}"#, split(0, 2)),
            format!(
                r#"{},{},{{"leaf":1}},{{"leaf":1}}"#,
                split(1, 1),
                split(2, 3)
            ),
        ] {
            assert!(
                matches!(
                    Model::from_json(&with_nodes(&nodes)),
                    Err(ModelError::Tree(0, _))
                ),
                "{nodes}"
            );
        }
        let unknown = with_nodes(
            r#"{"feature":"nope","threshold":1,"missing":"left","left":1,"right":2,"value":0},{"leaf":1},{"leaf":1}"#,
        );
        assert!(matches!(
            Model::from_json(&unknown),
            Err(ModelError::UnknownFeature(_))
        ));
        assert!(
            Model::from_json(&with_nodes(&format!(
                r#"{},{{"leaf":1}},{{"leaf":2}}"#,
                split(1, 2)
            )))
            .is_ok()
        );
    }

    #[test]
    fn bad_model_files_are_refused() {
        assert!(matches!(Model::from_json("{}"), Err(ModelError::Parse(_))));
        let unknown = r#"{"version":"t","description":"","bias":0,
            "bands":{"review_from":30,"human_from":70},
            "terms":[{"feature":"nope","weight":1,"transform":{"kind":"indicator"}}]}"#;
        assert!(matches!(
            Model::from_json(unknown),
            Err(ModelError::UnknownFeature(_))
        ));
        let bands = r#"{"version":"t","description":"","bias":0,
            "bands":{"review_from":80,"human_from":70},"terms":[]}"#;
        assert!(matches!(Model::from_json(bands), Err(ModelError::Bands)));
    }
}
