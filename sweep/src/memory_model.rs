//! What a point of the sweep needs in memory, learned from the trials that
//! ended (pure: no I/O; the driver feeds it trials and asks it of points).
//!
//! The model: the logarithm of a trial's peak (MiB) is linear in the
//! logarithm of each positive number it ran with (batch 2x -> peak times
//! 2^b), plus one term per categorical value (a string or a boolean), plus
//! an intercept. A parameter whose range reaches 0 or below enters as
//! itself (`Scale::Linear`): the space says which (`set_scale`), else its
//! first value does (a parameter the space does not have, such as a knob
//! auto-fix turned). A value its scale cannot take (0 for a log term) gives
//! that row no term of it. Least
//! squares with a small ridge on every term but the intercept, so a
//! categorical's values, which add up to the intercept, still solve, and a
//! parameter the peaks do not follow (a learning rate) keeps a coefficient
//! near 0 (`Fit::effects` lists them, for the report to say so).
//!
//! An out-of-memory trial is a censored point: what it needs is above the
//! limit it hit, not the last sample before it died. It enters as a point
//! at the larger of its prediction and 1.1 x the limit, the fit repeated a
//! few times (a simple EM for censored least squares), so a region that ran
//! out of memory is predicted above its limit even when the trials that
//! fitted were all small.
//!
//! Running sums: a measured trial adds its row to X'X, X'y and y'y once;
//! a fit solves the normal equations of those sums (and of the censored
//! points, which are kept: there are few, one per out-of-memory trial), so
//! the cost of a refit does not grow with the trials that fitted.

use serde_json::{Map, Value};
use std::collections::HashMap;

mod learn;
mod refuse;
pub use learn::{
    lesson, ran_with, values_of, Learner, Lesson, Predicted, RanOut, Resource, MIN_MEASURED,
    RAN_OUT_LEGS,
};
pub use refuse::{fits_as_fixed, refusal, Refusal, Room, FIXED_MARGIN, MIN_FREE, MIN_TO_REFUSE};

/// Ridge on every term but the intercept: small against a row's own weight
/// (1 per trial), large enough that collinear terms still solve.
const RIDGE: f64 = 1e-3;
/// A censored point's value, as a multiple of the limit it hit, before the
/// fit says it needs more.
const CENSORED_ABOVE: f64 = 1.1;
/// Rounds of the censored points' imputation; 5 settles them to well
/// under 1% on the tests' sweeps.
const CENSORED_ROUNDS: usize = 5;
/// About a 95% interval: two residual standard deviations.
const INTERVAL_SDS: f64 = 2.0;
/// The least residual standard deviation an interval is drawn with (in
/// ln MiB, about 5%): peaks sampled every 0.5 s differ by a few percent
/// between runs of one point, however well a few trials happen to fit.
const SD_FLOOR: f64 = 0.05;

/// One term of the model, by the parameter it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Term {
    /// ln of a positive number.
    Log(String),
    /// A number that was 0 or negative, as itself.
    Linear(String),
    /// A categorical value: `name = value`.
    Level(String, String),
}

impl std::fmt::Display for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Term::Log(n) => write!(f, "ln {n}"),
            Term::Linear(n) => write!(f, "{n}"),
            Term::Level(n, v) => write!(f, "{n}={v}"),
        }
    }
}

/// How a number enters the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// ln of the value: for what is always positive (batch, width, length).
    Log,
    /// The value itself: for what can be 0 or negative.
    Linear,
}

/// A trial's row: (term index, value), the intercept left out.
pub(crate) type Row = Vec<(usize, f64)>;

/// The sums a fit is solved from, and the censored points beside them.
#[derive(Debug, Default, Clone)]
pub struct MemoryModel {
    terms: Vec<Term>,
    index: HashMap<Term, usize>,
    scales: HashMap<String, Scale>,
    /// X'X over (intercept, terms...), grown as terms appear (earlier rows
    /// had 0 for a new term, so the grown sums stay exact).
    xtx: Vec<Vec<f64>>,
    xty: Vec<f64>,
    yty: f64,
    measured: usize,
    /// (row, ln of the limit it ran out of memory under).
    censored: Vec<(Row, f64)>,
}

/// A solved model.
#[derive(Debug, Clone)]
pub struct Fit {
    terms: Vec<Term>,
    scales: HashMap<String, Scale>,
    /// Intercept first.
    coef: Vec<f64>,
    /// (X'X + ridge)^-1, for each point's interval.
    inverse: Vec<Vec<f64>>,
    /// Residual standard deviation in ln(MiB).
    sd: f64,
    /// Trials behind it (measured and censored).
    pub trials: usize,
    /// Its residual degrees of freedom: trials less terms (with the
    /// intercept). Below 2 its spread is not yet known.
    pub free: usize,
}

/// What a point is predicted to need, in MiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    pub peak_mib: f64,
    pub low_mib: f64,
    pub high_mib: f64,
}

impl MemoryModel {
    /// How the number `name` enters, from the space's range for it (before
    /// the first trial with it).
    pub fn set_scale(&mut self, name: &str, scale: Scale) {
        self.scales.insert(name.to_string(), scale);
    }

    /// A trial that ended with a measured peak; false for a peak that is
    /// not one (0, negative, not finite), which teaches nothing.
    pub fn add_measured(&mut self, params: &Map<String, Value>, peak_mib: f64) -> bool {
        if !(peak_mib.is_finite() && peak_mib > 0.0) {
            return false;
        }
        let row = self.row(params);
        let dim = self.terms.len() + 1;
        accumulate(
            &mut self.xtx,
            &mut self.xty,
            &mut self.yty,
            &row,
            peak_mib.ln(),
            dim,
        );
        self.measured += 1;
        true
    }

    /// A trial that ran out of memory under `limit_mib` (or after a
    /// peak of that much); false as `add_measured`.
    pub fn add_censored(&mut self, params: &Map<String, Value>, limit_mib: f64) -> bool {
        if !(limit_mib.is_finite() && limit_mib > 0.0) {
            return false;
        }
        let row = self.row(params);
        self.censored.push((row, limit_mib.ln()));
        true
    }

    /// Trials it has learned from.
    pub fn trials(&self) -> usize {
        self.measured + self.censored.len()
    }

    /// The model solved from its sums, or None before any measured trial.
    pub fn fit(&self) -> Option<Fit> {
        if self.measured == 0 {
            return None;
        }
        let dim = self.terms.len() + 1;
        let mut fit = self.solve(&self.xtx, &self.xty, self.yty, self.measured)?;
        let rounds = if self.censored.is_empty() {
            0
        } else {
            CENSORED_ROUNDS
        };
        for _ in 0..rounds {
            let (mut xtx, mut xty, mut yty) = (self.xtx.clone(), self.xty.clone(), self.yty);
            for (row, ln_limit) in &self.censored {
                let y = fit.predict_row(row).max(ln_limit + CENSORED_ABOVE.ln());
                accumulate(&mut xtx, &mut xty, &mut yty, row, y, dim);
            }
            fit = self.solve(&xtx, &xty, yty, self.trials())?;
        }
        Some(fit)
    }

    fn solve(&self, xtx: &[Vec<f64>], xty: &[f64], yty: f64, n: usize) -> Option<Fit> {
        let dim = xtx.len();
        let mut a = xtx.to_vec();
        for (i, row) in a.iter_mut().enumerate().skip(1) {
            row[i] += RIDGE;
        }
        let inverse = invert_spd(&a)?;
        let coef: Vec<f64> = (0..dim).map(|i| dot(&inverse[i], xty)).collect();
        // The residual sum of squares from the sums: y'y - 2b'X'y + b'X'Xb.
        let xtx_b: Vec<f64> = xtx.iter().map(|r| dot(r, &coef)).collect();
        let rss = (yty - 2.0 * dot(&coef, xty) + dot(&coef, &xtx_b)).max(0.0);
        let free = n.saturating_sub(dim);
        Some(Fit {
            terms: self.terms.clone(),
            scales: self.scales.clone(),
            coef,
            inverse,
            sd: (rss / free.max(1) as f64).sqrt(),
            trials: n,
            free,
        })
    }

    /// A point's row by the model's terms, new terms registered (the
    /// terms are only ever added to, so a row stays valid for later fits).
    pub(crate) fn row(&mut self, params: &Map<String, Value>) -> Row {
        if self.xtx.is_empty() {
            // The intercept's row and column, before any term's.
            self.xtx.push(vec![0.0]);
            self.xty.push(0.0);
        }
        let mut row = Vec::new();
        for (name, value) in params {
            if let Some(x) = value.as_f64() {
                let first = if x > 0.0 { Scale::Log } else { Scale::Linear };
                // Looked up first: a trial's row is made for every trial
                // of a large study as a worker joins it.
                if !self.scales.contains_key(name) {
                    self.scales.insert(name.clone(), first);
                }
            }
            let Some((term, x)) = term_of(name, value, self.scales.get(name)) else {
                continue;
            };
            let i = self.term_index(term);
            row.push((i, x));
        }
        row
    }

    fn term_index(&mut self, term: Term) -> usize {
        if let Some(&i) = self.index.get(&term) {
            return i;
        }
        self.terms.push(term.clone());
        let i = self.terms.len();
        self.index.insert(term, i);
        for r in &mut self.xtx {
            r.push(0.0);
        }
        self.xtx.push(vec![0.0; i + 1]);
        self.xty.push(0.0);
        i
    }
}

/// A row's terms with the intercept, added to X'X, X'y and y'y.
fn accumulate(xtx: &mut [Vec<f64>], xty: &mut [f64], yty: &mut f64, row: &Row, y: f64, dim: usize) {
    let mut full = vec![0.0; dim];
    full[0] = 1.0;
    for &(i, x) in row {
        full[i] = x;
    }
    for i in 0..dim {
        if full[i] == 0.0 {
            continue;
        }
        for j in 0..dim {
            xtx[i][j] += full[i] * full[j];
        }
        xty[i] += full[i] * y;
    }
    *yty += y * y;
}

/// A parameter's term and its value in the row; None for what has no
/// bearing (null, a list, an object, a non-finite number, a number its
/// scale cannot take).
fn term_of(name: &str, value: &Value, scale: Option<&Scale>) -> Option<(Term, f64)> {
    match value {
        Value::Number(n) => {
            let x = n.as_f64().filter(|x| x.is_finite())?;
            match scale {
                Some(Scale::Linear) => Some((Term::Linear(name.to_string()), x)),
                _ if x > 0.0 => Some((Term::Log(name.to_string()), x.ln())),
                _ => None,
            }
        }
        Value::Bool(b) => Some((Term::Level(name.to_string(), b.to_string()), 1.0)),
        Value::String(s) => Some((Term::Level(name.to_string(), s.clone()), 1.0)),
        _ => None,
    }
}

impl Fit {
    /// What the point `params` needs: the fit's peak and an interval of
    /// about 95% for one new trial. A term the fit has not seen counts 0.
    pub fn predict(&self, params: &Map<String, Value>) -> Prediction {
        let dim = self.coef.len();
        let full = self.full(params);
        let y = dot(&self.coef, &full);
        let leverage: f64 = (0..dim)
            .map(|i| full[i] * dot(&self.inverse[i], &full))
            .sum();
        let half = INTERVAL_SDS * self.sd.max(SD_FLOOR) * (1.0 + leverage.max(0.0)).sqrt();
        Prediction {
            peak_mib: y.exp(),
            low_mib: (y - half).exp(),
            high_mib: (y + half).exp(),
        }
    }

    /// Whether the point `a` needs at least what `b` needs, with about 97.5%
    /// confidence: the difference of their ln peaks, less two standard
    /// errors of that difference, is not below 0 (the same point: yes).
    pub fn at_least(&self, a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
        self.at_least_rows(&self.full(a), &self.full(b))
    }

    /// `at_least` of two full rows (`full`, `dense`).
    pub(crate) fn at_least_rows(&self, xa: &[f64], xb: &[f64]) -> bool {
        let diff: Vec<f64> = xa.iter().zip(xb).map(|(p, q)| p - q).collect();
        let d = dot(&self.coef, &diff);
        let var: f64 = (0..diff.len())
            .map(|i| diff[i] * dot(&self.inverse[i], &diff))
            .sum();
        d - INTERVAL_SDS * self.sd.max(SD_FLOOR) * var.max(0.0).sqrt() >= -1e-9
    }

    /// A model's row as this fit's full row (a term added since counts 0).
    pub(crate) fn dense(&self, row: &Row) -> Vec<f64> {
        let mut full = vec![0.0; self.coef.len()];
        full[0] = 1.0;
        let dim = full.len();
        for &(i, x) in row.iter().filter(|(i, _)| *i < dim) {
            full[i] = x;
        }
        full
    }

    /// The ln of the peak a full row is predicted to need.
    pub(crate) fn ln_peak(&self, full: &[f64]) -> f64 {
        dot(&self.coef, full)
    }

    /// A point's full row by the fit's terms (intercept first); a term the
    /// fit has not seen counts 0.
    pub(crate) fn full(&self, params: &Map<String, Value>) -> Vec<f64> {
        let mut full = vec![0.0; self.coef.len()];
        full[0] = 1.0;
        for (name, value) in params {
            let Some((term, x)) = term_of(name, value, self.scales.get(name)) else {
                continue;
            };
            if let Some(i) = self.terms.iter().position(|t| *t == term) {
                full[i + 1] = x;
            }
        }
        full
    }

    pub(crate) fn predict_row(&self, row: &Row) -> f64 {
        self.coef[0]
            + row
                .iter()
                .filter(|(i, _)| *i < self.coef.len())
                .map(|&(i, x)| self.coef[i] * x)
                .sum::<f64>()
    }

    /// Each term with its coefficient (for a log term, the power of the
    /// parameter the peak follows: 1 is proportional, 0 no bearing).
    pub fn effects(&self) -> Vec<(&Term, f64)> {
        self.terms
            .iter()
            .zip(&self.coef[1..])
            .map(|(t, &c)| (t, c))
            .collect()
    }

    /// The residual standard deviation, as a factor on the peak (1.1 = the
    /// trials sit about 10% off the fit).
    pub fn spread(&self) -> f64 {
        self.sd.exp()
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The inverse of a symmetric positive definite matrix by Cholesky; None
/// when it is not (cannot happen with the ridge unless a sum is not
/// finite). Written here because the matrices have a few dozen rows at
/// most, where a linear-algebra crate's build time would buy nothing.
// Triangular solves read rows and columns by index.
#[allow(clippy::needless_range_loop)]
fn invert_spd(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = a[i][j] - (0..j).map(|k| l[i][k] * l[j][k]).sum::<f64>();
            if i == j {
                if !(s > 0.0 && s.is_finite()) {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    // Solve L L' x = e_c for each column c.
    let mut inv = vec![vec![0.0; n]; n];
    for c in 0..n {
        let mut z = vec![0.0; n];
        for i in 0..n {
            let e = if i == c { 1.0 } else { 0.0 };
            z[i] = (e - (0..i).map(|k| l[i][k] * z[k]).sum::<f64>()) / l[i][i];
        }
        let mut x = vec![0.0; n];
        for i in (0..n).rev() {
            x[i] = (z[i] - (i + 1..n).map(|k| l[k][i] * x[k]).sum::<f64>()) / l[i][i];
        }
        for i in 0..n {
            inv[i][c] = x[i];
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests;
