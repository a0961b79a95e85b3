//! The scoring model: a versioned JSON file of weighted feature transforms and, optionally, an
//! ensemble of regression trees.
//!
//! The score is `100 · sigmoid(bias + Σ weight · transform(feature) + Σ tree(features))`. Each
//! term is a contribution a person can read (`webdriver=1 (-8.00)`). Trees are split into
//! per-feature contributions along the path each session takes (Saabas's decomposition: every
//! split is charged the change of the expected value it makes), so the contributions of terms and
//! trees add up to the score's log-odds exactly, and the largest per-feature sums are the reasons
//! given with a score. A feature that was not measured contributes nothing through a term, and
//! in a tree follows its split's `missing` side, or, for `missing: average`, both sides weighed
//! by their training cover, which leaves the score where the unmeasured feature cannot move it.
//!
//! A split may look at a feature's *deviation* instead of its value: `|value - centre| / scale`
//! with the centre and scale of the model's `deviations` table (the TRAIN humans' median and
//! interquartile range). The harness constrains the trees to score larger deviations as no more
//! human, so a kind of automation unlike anything in training, far from people on one axis, is
//! not waved through because trees extrapolate flat beyond the data they saw.
//!
//! **Evidence.** A model may name the input modalities (`evidence`: pointer, touch, keyboard),
//! each with the count features that measure how much of it a session shows and a minimum. A
//! tree of a modality speaks only for a session with at least that minimum. A session with too
//! little of every modality that is `sufficient` for a verdict cannot be called human-like: its
//! score is held at the middle of `review` at most, with the amounts as its first reason
//! (`too little behaviour: 2 aimed pointer movements, 0 touch gestures, 0 keys`).

use serde::{Deserialize, Serialize};

use crate::features::Features;

mod file;
mod walk;

pub use file::{
    Bands, CohortReference, Deviation, Evidence, HumanRange, Node, Side, Term, Transform, Tree,
};
use walk::{Layout, SplitRead};

/// The model shipped with the binary; `modelVersion` is its `version`.
pub const DEFAULT_MODEL_JSON: &str = include_str!("../../models/telltale-v4.json");

/// The hand-set model that preceded training (weights chosen from what each feature means, no
/// bias): tests of features and of how tells move a score use it, since its terms are fixed by
/// design rather than by the latest training data.
pub const HAND_SET_MODEL_JSON: &str = include_str!("../../models/telltale-v1.json");

/// How many reasons a score carries.
pub const REASONS_PER_SCORE: usize = 3;

/// The model file format this release reads: a file's `format` (absent: 1) above it was
/// written for a newer release and is refused with [`ModelError::NewerFormat`]. Raised when a
/// file gains a field an older release would misread; a field older releases may ignore does
/// not need it. Format 2: `cohort_reference` (a release of format 1 would refuse the unknown
/// field with a parse error rather than say why).
pub const MODEL_FORMAT: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model file is not valid: {0}")]
    Parse(#[from] serde_json::Error),
    #[error(
        "the model file is of format {found}, written for a newer release of Telltale; this \
         release reads formats up to {known}"
    )]
    NewerFormat { found: u32, known: u32 },
    #[error("model names an unknown feature {0:?}")]
    UnknownFeature(String),
    #[error("model bands must satisfy 0 <= review_from <= human_from <= 100")]
    Bands,
    #[error("a split looks at the deviation of {0:?}, which has no positive scale in `deviations`")]
    Deviation(String),
    #[error("tree {0} is not a tree: {1}")]
    Tree(usize, String),
    #[error("evidence entry {0:?} is not valid: {1}")]
    Evidence(String, &'static str),
    #[error("the human range of {0:?} is not valid: {1}")]
    HumanRange(String, &'static str),
    #[error("the cohort reference is not valid: {0}")]
    CohortReference(&'static str),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// The file's format (see [`MODEL_FORMAT`]); absent in files of format 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<u32>,
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
    /// The input modalities, what each needs before its trees speak, and which may decide that
    /// a session is human-like; none before telltale-v4 (every tree always speaks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
    /// Where the TRAIN humans' values of each feature lie (quantiles), for the evidence view;
    /// none before telltale-v4. Scores never read them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub human_ranges: Vec<HumanRange>,
    /// The TRAIN people the cohort's people test compares a session with (files of format 2,
    /// from telltale-v7); without it, that test is not made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort_reference: Option<CohortReference>,
    /// Feature indexes of terms and evidence, and the trees' layout, resolved when read.
    #[serde(skip)]
    resolved: Lookup,
}

#[derive(Debug, Clone, Default)]
struct Lookup {
    terms: Vec<usize>,
    /// Feature index of each entry of `deviations`.
    deviations: Vec<usize>,
    /// Feature indexes of each evidence entry's count features.
    evidence: Vec<Vec<usize>>,
    layout: Layout,
    /// Every feature some split of a tree without a modality looks at, once: such trees speak
    /// only when one of them is measured.
    always_features: Vec<usize>,
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

/// Why a session scored as it did, most important first.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// A feature's contribution to the log-odds.
    Feature(Contribution),
    /// The session showed too little of every modality that can decide: the amounts, in the
    /// model's `evidence` order, with their labels.
    TooLittleBehaviour(Vec<(String, f64)>),
    /// The scoring run found this many other sessions of the survey alike with this one in one
    /// modality (`pointing`, `typing`, `touch`), far more than people would be
    /// ([`crate::cohort`]).
    Cohort { alike: u32, modality: &'static str },
}

impl Reason {
    /// `webdriver=1 (-8.00)`, or `too little behaviour: 2 aimed pointer movements, 0 keys`.
    pub fn describe(&self) -> String {
        match self {
            Reason::Feature(contribution) => contribution.describe(),
            Reason::TooLittleBehaviour(amounts) => {
                let parts: Vec<String> = amounts
                    .iter()
                    .map(|(label, amount)| format!("{} {label}", trim(*amount)))
                    .collect();
                format!("too little behaviour: {}", parts.join(", "))
            }
            Reason::Cohort { alike, modality } => {
                format!(
                    "{} sessions in this survey move alike ({modality})",
                    u64::from(*alike) + 1
                )
            }
        }
    }

    /// The contribution, when the reason is one.
    pub fn contribution(&self) -> Option<&Contribution> {
        match self {
            Reason::Feature(contribution) => Some(contribution),
            Reason::TooLittleBehaviour(_) | Reason::Cohort { .. } => None,
        }
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
    /// Why, most important first: for `human-like` the largest contributions towards it, for
    /// `automation-like` the largest against, for `review` a lack of evidence first and then
    /// the largest either way.
    pub reasons: Vec<Reason>,
}

/// What [`Model::evaluate`] works out for one session.
struct Evaluation {
    z: f64,
    effects: Vec<f64>,
    amounts: Vec<f64>,
}

pub const BAND_AUTOMATION: &str = "automation-like";
pub const BAND_REVIEW: &str = "review";
pub const BAND_HUMAN: &str = "human-like";

impl Model {
    pub fn default_model() -> Result<Model, ModelError> {
        Model::from_json(DEFAULT_MODEL_JSON)
    }

    /// Where `value` of `feature` sits among the TRAIN humans (a percentile, 0-100), when the
    /// model file carries that feature's range and the value was measured.
    pub fn human_percentile(&self, feature: &str, value: f64) -> Option<f64> {
        self.human_ranges
            .iter()
            .find(|range| range.feature == feature)
            .and_then(|range| range.percentile(value))
    }

    /// Parses and checks a model file.
    pub fn from_json(json: &str) -> Result<Model, ModelError> {
        // The format first, on its own: a newer file's other fields may not parse here.
        #[derive(Deserialize)]
        struct Format {
            #[serde(default)]
            format: Option<u32>,
        }
        let found = serde_json::from_str::<Format>(json)?.format.unwrap_or(1);
        if found > MODEL_FORMAT {
            return Err(ModelError::NewerFormat {
                found,
                known: MODEL_FORMAT,
            });
        }
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
        for entry in &model.evidence {
            if entry.features.is_empty() {
                return Err(ModelError::Evidence(entry.modality.clone(), "no features"));
            }
            if !entry.minimum.is_finite() || entry.minimum < 0.0 {
                return Err(ModelError::Evidence(
                    entry.modality.clone(),
                    "minimum must be a finite amount of at least 0",
                ));
            }
            if entry
                .human_minimum
                .is_some_and(|human| !human.is_finite() || human < entry.minimum)
            {
                return Err(ModelError::Evidence(
                    entry.modality.clone(),
                    "human_minimum must be a finite amount of at least minimum",
                ));
            }
            if model
                .evidence
                .iter()
                .filter(|e| e.modality == entry.modality)
                .count()
                > 1
            {
                return Err(ModelError::Evidence(entry.modality.clone(), "named twice"));
            }
            let features = entry
                .features
                .iter()
                .map(|name| index(name))
                .collect::<Result<_, _>>()?;
            model.resolved.evidence.push(features);
        }
        for (number, range) in model.human_ranges.iter().enumerate() {
            index(&range.feature)?;
            range
                .check()
                .map_err(|why| ModelError::HumanRange(range.feature.clone(), why))?;
            if model.human_ranges[..number]
                .iter()
                .any(|other| other.feature == range.feature)
            {
                return Err(ModelError::HumanRange(range.feature.clone(), "named twice"));
            }
        }
        if let Some(reference) = &model.cohort_reference {
            for name in &reference.features {
                index(name)?;
            }
            reference.check().map_err(ModelError::CohortReference)?;
        }
        for (number, tree) in model.trees.iter().enumerate() {
            file::check_tree(tree).map_err(|why| ModelError::Tree(number, why.to_owned()))?;
        }
        let mut unknown: Option<ModelError> = None;
        let evidence = &model.evidence;
        let deviations = &model.deviations;
        let layout = Layout::new(
            &model.trees,
            evidence.len(),
            |tree| match &tree.modality {
                None => Ok(None),
                Some(name) => evidence
                    .iter()
                    .position(|entry| entry.modality == *name)
                    .map(Some)
                    .ok_or_else(|| format!("its modality {name:?} has no evidence entry")),
            },
            |node| {
                let Node::Split {
                    feature, deviation, ..
                } = node
                else {
                    return Err("a leaf has no feature".to_owned());
                };
                let own = match index(feature) {
                    Ok(own) => own,
                    Err(error) => {
                        let why = error.to_string();
                        unknown = Some(error);
                        return Err(why);
                    }
                };
                let read = if *deviation {
                    let Some(position) = deviations.iter().position(|d| {
                        d.feature == *feature && d.scale > 0.0 && d.centre.is_finite()
                    }) else {
                        let why = format!("no deviation for {feature:?}");
                        unknown = Some(ModelError::Deviation(feature.clone()));
                        return Err(why);
                    };
                    Features::NAMES.len() + position
                } else {
                    own
                };
                Ok(SplitRead { read, feature: own })
            },
        );
        let layout = match layout {
            Ok(layout) => layout,
            // A split naming an unknown feature or deviation is that error, not a bad tree.
            Err((number, why)) => return Err(unknown.unwrap_or(ModelError::Tree(number, why))),
        };
        model.resolved.layout = layout;
        // Features of trees without a modality only.
        model.resolved.always_features = model
            .trees
            .iter()
            .filter(|tree| tree.modality.is_none())
            .flat_map(|tree| &tree.nodes)
            .filter_map(|node| match node {
                Node::Split { feature, .. } => index(feature).ok(),
                Node::Leaf { .. } => None,
            })
            .fold(Vec::new(), |mut seen, feature| {
                if !seen.contains(&feature) {
                    seen.push(feature);
                }
                seen
            });
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

    /// Each evidence entry's amount (its count features summed; unmeasured counts as none).
    fn evidence_amounts(&self, values: &[f64]) -> Vec<f64> {
        self.resolved
            .evidence
            .iter()
            .map(|features| {
                features
                    .iter()
                    .map(|&feature| values[feature])
                    .filter(|value| value.is_finite())
                    // Not `sum`: an empty sum of floats is -0, which reads "-0 keys".
                    .fold(0.0, |total, value| total + value)
            })
            .collect()
    }

    /// The score's most telling `feature=value (effect)` reasons in the band's direction.
    /// Every feature's part in the score's log-odds (positive towards human-like), in
    /// [`Features::NAMES`] order: what the reasons are chosen from.
    pub fn contributions(&self, features: &Features) -> Vec<f64> {
        self.evaluate(&features.values()).effects
    }

    /// The log-odds of `values`, each feature's part in it, and each modality's amount of
    /// evidence and whether its trees spoke (the last entry: trees of no modality).
    fn evaluate(&self, values: &[f64]) -> Evaluation {
        let split_values = self.split_values(values);
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
        let amounts = self.evidence_amounts(values);
        // Which trees speak: those of a modality the session shows enough of, and those of no
        // modality when any feature they read was measured (a session none of whose tree
        // features was measured, a page submitted by script, is outside anything they were
        // fitted on; it keeps the bias and the terms alone).
        let mut active: Vec<bool> = amounts
            .iter()
            .zip(&self.evidence)
            .map(|(amount, entry)| *amount >= entry.minimum)
            .collect();
        active.push(
            self.resolved
                .always_features
                .iter()
                .any(|&feature| !values[feature].is_nan()),
        );
        if !self.trees.is_empty() && active.iter().any(|a| *a) {
            let layout = &self.resolved.layout;
            if layout.needs_expectation(&split_values, &active) {
                layout.expected_walk(&split_values, &active, &mut z, &mut effects);
            } else {
                layout.walk(&split_values, &active, &mut z, &mut effects);
            }
        }
        Evaluation {
            z,
            effects,
            amounts,
        }
    }

    pub fn score(&self, features: &Features) -> Score {
        let values = features.values();
        let Evaluation {
            z,
            effects,
            amounts,
        } = self.evaluate(&values);
        // Two decimals: the score is read by people and compared against band thresholds.
        let mut percent = (100.0 / (1.0 + (-z).exp()) * 100.0).round() / 100.0;
        // Too little to call it human: no modality that may decide shows enough of itself to
        // (its `human_minimum`; at the bare minimum its trees speak, but only towards review).
        let too_little = !self.evidence.is_empty()
            && !self
                .evidence
                .iter()
                .zip(&amounts)
                .any(|(entry, amount)| entry.sufficient && *amount >= entry.decides_from());
        if too_little {
            // Not enough behaviour to call it human: the score says no more than "review".
            let middle = (self.bands.review_from + self.bands.human_from) / 2.0;
            percent = percent.min(middle);
        }
        let band = self.band(percent);
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
        // The reasons point the band's way: what made a session human-like, what made it
        // automation-like; a review shows the largest either way.
        match band {
            BAND_HUMAN => {
                contributions.retain(|c| c.effect > 0.0);
                contributions.sort_by(|a, b| b.effect.total_cmp(&a.effect));
            }
            BAND_AUTOMATION => {
                contributions.retain(|c| c.effect < 0.0);
                contributions.sort_by(|a, b| a.effect.total_cmp(&b.effect));
            }
            _ => contributions.sort_by(|a, b| b.effect.abs().total_cmp(&a.effect.abs())),
        }
        let mut reasons = Vec::with_capacity(REASONS_PER_SCORE);
        // A review for want of behaviour says so first; an automation-like verdict stands on
        // what counted against it.
        if too_little && band == BAND_REVIEW {
            reasons.push(Reason::TooLittleBehaviour(
                self.evidence
                    .iter()
                    .zip(&amounts)
                    .map(|(entry, amount)| (entry.label.clone(), *amount))
                    .collect(),
            ));
        }
        reasons.extend(contributions.into_iter().map(Reason::Feature));
        reasons.truncate(REASONS_PER_SCORE);
        Score {
            human_score_percent: percent,
            band,
            reasons,
        }
    }
}

#[cfg(test)]
mod tests;
