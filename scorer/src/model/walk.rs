//! The trees laid out for scoring: every node a fixed-size step, trees walked eight side by side,
//! and the expected walk that an unmeasured feature at an `average` split needs.

use super::file::{Node, Side, Tree};

/// Trees per [`Group`].
pub(super) const LANES: usize = 8;

/// A tree node as the walk reads it. Its two branches' effects (the child's value minus the
/// node's) are computed when the model is read, and a leaf branches to itself with no effect:
/// every walk takes a fixed number of steps, with no exit that depends on the data.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    threshold: f64,
    /// Effect of going left, right.
    effects: [f64; 2],
    /// Indexes into [`Layout::steps`] of the left and right child.
    children: [u32; 2],
    /// Index of the value the split reads in the split values: a feature's own index, or
    /// `Features::NAMES.len()` plus the position of its deviation.
    read: u32,
    /// The feature a branch's effect is charged to (a deviation's feature for a deviation).
    feature: u32,
    missing: Side,
    /// Share of the training cover that went left (an `average` split's weight of its left).
    left_share: f64,
    leaf: bool,
}

impl Step {
    /// A leaf at `index` of [`Layout::steps`]: both branches lead back to it, adding nothing.
    fn leaf(index: u32) -> Step {
        Step {
            threshold: 0.0,
            effects: [0.0, 0.0],
            children: [index, index],
            read: 0,
            feature: 0,
            missing: Side::Left,
            left_share: 0.5,
            leaf: true,
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
    /// Indexes into [`Layout::steps`] of the trees' roots; a lane past the group's last tree
    /// starts at a leaf with no value.
    roots: [u32; LANES],
    root_values: [f64; LANES],
    /// Splits on the longest path from a root.
    depth: usize,
    /// The group's trees' modality (an index into the model's `evidence`), `None` for trees
    /// that always speak. A group holds trees of one modality only.
    modality: Option<usize>,
}

/// One tree's root, for the expected walk (file order).
#[derive(Debug, Clone, Copy)]
struct Root {
    step: u32,
    value: f64,
    modality: Option<usize>,
}

/// What a node of the file resolves to: the value a split reads and the feature it is charged
/// to (`resolve` in `Model::from_json`).
pub(super) struct SplitRead {
    pub(super) read: usize,
    pub(super) feature: usize,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Layout {
    /// Every tree's nodes, tree after tree.
    steps: Vec<Step>,
    groups: Vec<Group>,
    /// The deepest group's depth.
    max_depth: usize,
    roots: Vec<Root>,
    /// Per modality (and last, the trees without one): the split values read by `average`
    /// splits. An unmeasured one sends the session to the expected walk.
    averaged: Vec<Vec<usize>>,
}

impl Layout {
    /// Lays out `trees`; `modality_of` gives each tree's modality index, `resolve` each split
    /// node's read and charged feature.
    pub(super) fn new(
        trees: &[Tree],
        modalities: usize,
        modality_of: impl Fn(&Tree) -> Result<Option<usize>, String>,
        mut resolve: impl FnMut(&Node) -> Result<SplitRead, String>,
    ) -> Result<Layout, (usize, String)> {
        let mut layout = Layout {
            averaged: vec![Vec::new(); modalities + 1],
            ..Layout::default()
        };
        // Each tree's (root step, depth, root value, modality), in file order.
        let mut walks: Vec<(u32, usize, f64, Option<usize>)> = Vec::with_capacity(trees.len());
        for (number, tree) in trees.iter().enumerate() {
            let modality = modality_of(tree).map_err(|why| (number, why))?;
            let base = layout.steps.len();
            let index_of = |node: usize| {
                u32::try_from(base + node).map_err(|_| (number, "too many nodes".to_owned()))
            };
            // A node's parent has a smaller index (check_tree), so one pass in order finds
            // every node's depth.
            let mut depths = vec![0u32; tree.nodes.len()];
            for (position, node) in tree.nodes.iter().enumerate() {
                let Node::Split {
                    threshold,
                    missing,
                    left,
                    right,
                    value,
                    ..
                } = node
                else {
                    layout.steps.push(Step::leaf(index_of(position)?));
                    continue;
                };
                let SplitRead { read, feature } = resolve(node).map_err(|why| (number, why))?;
                for child in [*left, *right] {
                    depths[child] = depths[position] + 1;
                }
                let (left_cover, right_cover) =
                    (tree.nodes[*left].cover(), tree.nodes[*right].cover());
                let left_share = if left_cover + right_cover > 0.0 {
                    left_cover / (left_cover + right_cover)
                } else {
                    0.5
                };
                if *missing == Side::Average {
                    let slot = &mut layout.averaged[modality.unwrap_or(modalities)];
                    if !slot.contains(&read) {
                        slot.push(read);
                    }
                }
                layout.steps.push(Step {
                    threshold: *threshold,
                    effects: [
                        tree.nodes[*left].value() - value,
                        tree.nodes[*right].value() - value,
                    ],
                    children: [index_of(*left)?, index_of(*right)?],
                    // Both fit: there are fewer features and deviations than u32::MAX.
                    read: read as u32,
                    feature: feature as u32,
                    missing: *missing,
                    left_share,
                    leaf: false,
                });
            }
            let root = index_of(0)?;
            let depth = depths.iter().copied().max().unwrap_or(0) as usize;
            walks.push((root, depth, tree.nodes[0].value(), modality));
            layout.roots.push(Root {
                step: root,
                value: tree.nodes[0].value(),
                modality,
            });
        }
        // Lanes past a group's last tree: a leaf that adds nothing.
        let nothing = u32::try_from(layout.steps.len())
            .map_err(|_| (trees.len(), "too many nodes".to_owned()))?;
        layout.steps.push(Step::leaf(nothing));
        // Groups of consecutive trees of one modality, in file order.
        let mut start = 0;
        while start < walks.len() {
            let modality = walks[start].3;
            let mut group = Group {
                roots: [nothing; LANES],
                root_values: [0.0; LANES],
                depth: 0,
                modality,
            };
            let mut lane = 0;
            while lane < LANES && start + lane < walks.len() && walks[start + lane].3 == modality {
                let (root, depth, value, _) = walks[start + lane];
                group.roots[lane] = root;
                group.root_values[lane] = value;
                group.depth = group.depth.max(depth);
                lane += 1;
            }
            layout.max_depth = layout.max_depth.max(group.depth);
            layout.groups.push(group);
            start += lane;
        }
        Ok(layout)
    }

    /// Whether an `average` split of an active modality would read an unmeasured value.
    pub(super) fn needs_expectation(&self, split_values: &[f64], active: &[bool]) -> bool {
        self.averaged.iter().enumerate().any(|(slot, reads)| {
            active.get(slot).copied().unwrap_or(true)
                && reads.iter().any(|&read| split_values[read].is_nan())
        })
    }

    /// Adds the value of every tree whose modality is `active` (the trees without one count as
    /// the slot past the modalities) to `z`, and each branch's effect to its feature's entry of
    /// `effects`. Unmeasured values follow their split's `missing` side; an `average` split's
    /// unmeasured value needs [`Self::expected_walk`].
    pub(super) fn walk(
        &self,
        split_values: &[f64],
        active: &[bool],
        z: &mut f64,
        effects: &mut [f64],
    ) {
        let steps = &self.steps;
        let modalities = self.averaged.len() - 1;
        // Each lane's (effect, feature) at each level, added up once the group is walked.
        let stride = self.max_depth;
        let mut trail = vec![(0.0, 0u32); LANES * stride];
        for group in &self.groups {
            if !active[group.modality.unwrap_or(modalities)] {
                continue;
            }
            let mut nodes = group.roots.map(|root| root as usize);
            for level in 0..group.depth {
                for (lane, node) in nodes.iter_mut().enumerate() {
                    let step = &steps[*node];
                    let value = split_values[step.read as usize];
                    // An unmeasured value (NaN compares false) takes the split's missing side.
                    let left =
                        (value <= step.threshold) | (value.is_nan() & (step.missing == Side::Left));
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

    /// As [`Self::walk`], but an unmeasured value at an `average` split goes both ways, each
    /// side weighted by its share of the training cover: the tree adds its expected value over
    /// what the feature might have been. That split's own effects cancel (a node's value is the
    /// cover-weighted mean of its children's), so nothing is charged to the unmeasured feature.
    pub(super) fn expected_walk(
        &self,
        split_values: &[f64],
        active: &[bool],
        z: &mut f64,
        effects: &mut [f64],
    ) {
        let modalities = self.averaged.len() - 1;
        for root in &self.roots {
            if !active[root.modality.unwrap_or(modalities)] {
                continue;
            }
            *z += root.value;
            self.descend(root.step, 1.0, split_values, z, effects);
        }
    }

    fn descend(
        &self,
        node: u32,
        weight: f64,
        split_values: &[f64],
        z: &mut f64,
        effects: &mut [f64],
    ) {
        let step = &self.steps[node as usize];
        if step.leaf {
            return;
        }
        let value = split_values[step.read as usize];
        if value.is_nan() && step.missing == Side::Average {
            let shares = [step.left_share, 1.0 - step.left_share];
            for (child, share) in step.children.into_iter().zip(shares) {
                if share > 0.0 {
                    self.descend(child, weight * share, split_values, z, effects);
                }
            }
            return;
        }
        let left = (value <= step.threshold) | (value.is_nan() & (step.missing == Side::Left));
        let side = usize::from(!left);
        let effect = weight * step.effects[side];
        *z += effect;
        effects[step.feature as usize] += effect;
        self.descend(step.children[side], weight, split_values, z, effects);
    }
}
