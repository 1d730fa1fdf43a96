//! Optuna's Parzen estimator (`_ParzenEstimator`, Optuna 5.0.0): a weighted
//! mixture of one kernel per observation plus a prior kernel; per parameter
//! a kernel is a normal truncated to the range (in log space for log
//! parameters, integrated over each grid cell for stepped ones) or, for
//! choices, a smoothed one-hot distribution. Over several parameters (the
//! multivariate TPE) kernel k is the product of the parameters' kernels k.

use super::random::round_even;
use super::rng::Rng;
use super::truncnorm::{log_gauss_mass, logpdf_z, ppf};
use super::{float_step_high, int_step_high};
use crate::trial::Distribution;

/// The estimator's knobs, at TPESampler's defaults (Optuna 4.x and 5.0 alike).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParzenParams {
    /// The prior kernel's weight against an observation's (consider_prior is
    /// always on since Optuna 4.3).
    pub prior_weight: f64,
    /// Floor each bandwidth at range / min(100, 1 + kernels), so one
    /// observation in a crowd does not turn into a spike.
    pub consider_magic_clip: bool,
    /// Whether the outermost observations' bandwidth may reach to the range's
    /// ends (off: they take their inner neighbour's gap).
    pub consider_endpoints: bool,
}

impl Default for ParzenParams {
    fn default() -> Self {
        ParzenParams {
            prior_weight: 1.0,
            consider_magic_clip: true,
            consider_endpoints: false,
        }
    }
}

/// Optuna's `default_weights`: equal weights up to 25 observations, then the
/// oldest ones (observations in trial order) ramp down from 1/n, so the
/// newest 25 count fully.
pub fn default_weights(n: usize) -> Vec<f64> {
    if n < 25 {
        return vec![1.0; n];
    }
    let m = n - 25;
    let (start, stop) = (1.0 / n as f64, 1.0);
    let mut w: Vec<f64> = match m {
        0 => vec![],
        1 => vec![start],
        _ => {
            // numpy.linspace: k·step + start, the last point exactly stop.
            let step = (stop - start) / (m - 1) as f64;
            (0..m)
                .map(|k| {
                    if k + 1 == m {
                        stop
                    } else {
                        k as f64 * step + start
                    }
                })
                .collect()
        }
    };
    w.extend(std::iter::repeat_n(1.0, 25));
    w
}

#[derive(Clone, Debug)]
enum Kernels {
    Categorical {
        /// Row k: kernel k's probability of each choice.
        rows: Vec<Vec<f64>>,
        /// Their logarithms.
        ln_rows: Vec<Vec<f64>>,
    },
    Numerical {
        mus: Vec<f64>,
        sigmas: Vec<f64>,
        /// The distribution's range (high lowered onto the step grid).
        low: f64,
        high: f64,
        log: bool,
        step: Option<f64>,
        /// The kernels' range: low and high in log space for log, widened
        /// by half a step each side for a step.
        lo: f64,
        hi: f64,
        /// What a density needs of kernel k at every point, worked out once:
        /// the log of its mass over [lo, hi], and ln sigma. A TPE draw
        /// weighs 24 candidates against every kernel, and these were most
        /// of its time.
        log_mass: Vec<f64>,
        ln_sigma: Vec<f64>,
    },
}

/// A Parzen estimator in Optuna's internal representation (numbers as they
/// are, a choice as its index): over one parameter (`new`), or over several
/// jointly (`joint`, multivariate TPE) as a mixture of products: kernel k is
/// the product of every parameter's kernel k, so the parameters observed
/// together in a trial stay together.
#[derive(Clone, Debug)]
pub struct ParzenEstimator {
    /// The mixture's weights, normalised, the prior's last.
    weights: Vec<f64>,
    /// Their logarithms.
    ln_weights: Vec<f64>,
    /// One set of kernels per parameter, all with the weights' length.
    dims: Vec<Kernels>,
}

impl ParzenEstimator {
    /// Over one parameter, from observations in trial order (the weights
    /// ramp by that order).
    pub fn new(d: &Distribution, observations: &[f64], params: &ParzenParams) -> ParzenEstimator {
        ParzenEstimator::joint(&[(d, observations)], params)
    }

    /// Over several parameters: `dims[i]` is parameter i's distribution and
    /// its value in each observed trial, every list the same trials in trial
    /// order (a trial lacking one of the parameters is left out by the
    /// caller, as Optuna does).
    pub fn joint(dims: &[(&Distribution, &[f64])], params: &ParzenParams) -> ParzenEstimator {
        let n = dims.first().map_or(0, |(_, obs)| obs.len());
        debug_assert!(dims.iter().all(|(_, obs)| obs.len() == n));
        let mut weights = default_weights(n);
        if n == 0 {
            weights = vec![1.0];
        } else {
            weights.push(params.prior_weight);
        }
        let total: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= total);
        let dims = dims
            .iter()
            .map(|(d, obs)| kernels(d, obs, params))
            .collect();
        let ln_weights = weights.iter().map(|w| w.ln()).collect();
        ParzenEstimator {
            weights,
            ln_weights,
            dims,
        }
    }

    /// log p(x) of a one-parameter mixture, x in internal representation.
    pub fn log_pdf(&self, x: f64) -> f64 {
        self.log_pdf_joint(&[x])
    }

    /// log p(x) of the mixture, x one value per parameter (`joint`'s order).
    pub fn log_pdf_joint(&self, x: &[f64]) -> f64 {
        // Kernel k's log density summed over the parameters, then its
        // weight: the sums in the order a kernel at a time would make them.
        let mut sums = vec![0.0; self.weights.len()];
        for (kernels, &xi) in self.dims.iter().zip(x) {
            kernels.add_log_pdfs(xi, &mut sums);
        }
        let terms: Vec<f64> = self
            .ln_weights
            .iter()
            .zip(&sums)
            .map(|(w, s)| w + s)
            .collect();
        log_sum_exp(&terms)
    }

    /// `n` draws from a one-parameter mixture.
    pub(crate) fn sample(&self, rng: &mut Rng, n: usize) -> Vec<f64> {
        self.sample_joint(rng, n)
            .into_iter()
            .map(|row| row[0])
            .collect()
    }

    /// `n` draws from the mixture, each one value per parameter: a kernel by
    /// weight, then each parameter's value from that same kernel (by inverse
    /// CDF for the truncated normals), parameter by parameter as Optuna.
    pub(crate) fn sample_joint(&self, rng: &mut Rng, n: usize) -> Vec<Vec<f64>> {
        let mut cum: Vec<f64> = self
            .weights
            .iter()
            .scan(0.0, |acc, w| {
                *acc += w;
                Some(*acc)
            })
            .collect();
        let total = *cum.last().expect("the prior kernel is always there");
        cum.iter_mut().for_each(|c| *c /= total);
        // numpy's choice(p=...): searchsorted(cdf, u, side="right").
        let active: Vec<usize> = (0..n)
            .map(|_| {
                let u = rng.uniform();
                cum.partition_point(|&c| c <= u).min(cum.len() - 1)
            })
            .collect();
        let mut rows = vec![Vec::with_capacity(self.dims.len()); n];
        for kernels in &self.dims {
            for (row, &k) in rows.iter_mut().zip(&active) {
                row.push(draw(kernels, k, rng));
            }
        }
        rows
    }
}

/// log Σ exp(t), from the largest term (-∞ when every term is).
fn log_sum_exp(terms: &[f64]) -> f64 {
    let max = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    terms.iter().map(|t| (t - max).exp()).sum::<f64>().ln() + max
}

fn kernels(d: &Distribution, observations: &[f64], params: &ParzenParams) -> Kernels {
    match d {
        Distribution::Categorical { choices } => {
            let rows = categorical(observations, choices.len(), params);
            let ln_rows = rows
                .iter()
                .map(|r| r.iter().map(|p| p.ln()).collect())
                .collect();
            Kernels::Categorical { rows, ln_rows }
        }
        Distribution::Float {
            low,
            high,
            log,
            step,
        } => {
            let high = step.map_or(*high, |s| float_step_high(*low, *high, s));
            numerical(observations, *low, high, *log, *step, params)
        }
        Distribution::Int {
            low,
            high,
            log,
            step,
        } => {
            let high = int_step_high(*low, *high, *step) as f64;
            numerical(
                observations,
                *low as f64,
                high,
                *log,
                Some(*step as f64),
                params,
            )
        }
    }
}

impl Kernels {
    /// Adds each kernel's log density at x (internal representation) to
    /// `sums[k]`: a truncated normal's for a continuous range, its mass
    /// over x's grid cell for a step, the row's probability for a choice.
    fn add_log_pdfs(&self, x: f64, sums: &mut [f64]) {
        match self {
            Kernels::Categorical { ln_rows, .. } => {
                for (sum, row) in sums.iter_mut().zip(ln_rows) {
                    *sum += row[x as usize];
                }
            }
            Kernels::Numerical {
                mus,
                sigmas,
                log,
                step,
                lo,
                hi,
                log_mass,
                ln_sigma,
                ..
            } => {
                let t = |v: f64| if *log { v.ln() } else { v };
                let kernels = mus.iter().zip(sigmas).zip(log_mass.iter().zip(ln_sigma));
                match step {
                    None => {
                        let x = t(x);
                        for (sum, ((mu, sigma), (mass, ln_sigma))) in sums.iter_mut().zip(kernels) {
                            let (a, b) = ((lo - mu) / sigma, (hi - mu) / sigma);
                            *sum += logpdf_z((x - mu) / sigma, a, b, *mass, *ln_sigma);
                        }
                    }
                    Some(s) => {
                        let (x_lo, x_hi) = (t(x - s / 2.0), t(x + s / 2.0));
                        for (sum, ((mu, sigma), (mass, _))) in sums.iter_mut().zip(kernels) {
                            let cell = log_gauss_mass((x_lo - mu) / sigma, (x_hi - mu) / sigma);
                            *sum += cell - mass;
                        }
                    }
                }
            }
        }
    }
}

/// One value from kernel k: one uniform, through the categorical row's
/// cumulative sums or the truncated normal's inverse CDF.
fn draw(kernels: &Kernels, k: usize, rng: &mut Rng) -> f64 {
    match kernels {
        Kernels::Categorical { rows, .. } => {
            let u = rng.uniform();
            let mut acc = 0.0;
            let last = rows[k].len() - 1;
            // The count of cumulative probabilities below u, the last one
            // taken as exactly 1.
            rows[k][..last]
                .iter()
                .take_while(|&&p| {
                    acc += p;
                    acc < u
                })
                .count() as f64
        }
        Kernels::Numerical {
            mus,
            sigmas,
            low,
            high,
            log,
            step,
            lo,
            hi,
            ..
        } => {
            let (mu, sigma) = (mus[k], sigmas[k]);
            let q = rng.uniform();
            let mut x = ppf(q, (lo - mu) / sigma, (hi - mu) / sigma) * sigma + mu;
            if *log {
                x = x.exp();
            }
            if let Some(s) = step {
                x = (low + round_even((x - low) / s) * s).clamp(*low, *high);
            }
            x
        }
    }
}

/// Kernel k puts prior_weight/(n+1) on every choice and 1 more on its
/// observation, normalised; the prior (last row) is uniform.
fn categorical(observations: &[f64], n_choices: usize, params: &ParzenParams) -> Vec<Vec<f64>> {
    if observations.is_empty() {
        return vec![vec![1.0 / n_choices as f64; n_choices]];
    }
    let n_kernels = observations.len() + 1;
    let mut rows = vec![vec![params.prior_weight / n_kernels as f64; n_choices]; n_kernels];
    for (row, &x) in rows.iter_mut().zip(observations) {
        row[x as usize] += 1.0;
    }
    for row in &mut rows {
        let sum: f64 = row.iter().sum();
        let sum = if sum == 0.0 { 1.0 } else { sum };
        row.iter_mut().for_each(|p| *p /= sum);
    }
    rows
}

/// Kernels at the observations (in log space for log), each as wide as the
/// larger gap to its sorted neighbours (the range's ends count as
/// neighbours), clipped to [range / min(100, n + 2), range]; plus the prior:
/// centred, as wide as the range. A step widens the range by half a step
/// each side, so the end values get a whole cell.
fn numerical(
    observations: &[f64],
    low: f64,
    high: f64,
    log: bool,
    step: Option<f64>,
    params: &ParzenParams,
) -> Kernels {
    let half = step.unwrap_or(0.0) / 2.0;
    let t = |v: f64| if log { v.ln() } else { v };
    let (lo, hi) = (t(low - half), t(high + half));
    let mut mus: Vec<f64> = observations.iter().map(|&x| t(x)).collect();
    let n = mus.len();

    // Stable: tied observations keep trial order. numpy's argsort is not
    // stable past 16 values, so there Optuna may give two tied kernels each
    // other's bandwidth (the same mixture over one parameter, another pairing
    // over several).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| mus[i].total_cmp(&mus[j]));
    let mut ends = Vec::with_capacity(n + 2);
    ends.push(lo);
    ends.extend(order.iter().map(|&i| mus[i]));
    ends.push(hi);
    let mut sorted_sigmas: Vec<f64> = (1..=n)
        .map(|i| (ends[i] - ends[i - 1]).max(ends[i + 1] - ends[i]))
        .collect();
    if !params.consider_endpoints && ends.len() >= 4 {
        sorted_sigmas[0] = ends[2] - ends[1];
        sorted_sigmas[n - 1] = ends[n] - ends[n - 1];
    }
    let max_sigma = hi - lo;
    let min_sigma = if params.consider_magic_clip {
        (hi - lo) / 100f64.min(1.0 + (n + 1) as f64)
    } else {
        1e-12
    };
    let mut sigmas = vec![0.0; n];
    for (rank, &i) in order.iter().enumerate() {
        sigmas[i] = sorted_sigmas[rank].max(min_sigma).min(max_sigma);
    }
    mus.push(0.5 * (lo + hi));
    sigmas.push(hi - lo);
    let log_mass = mus
        .iter()
        .zip(&sigmas)
        .map(|(mu, sigma)| log_gauss_mass((lo - mu) / sigma, (hi - mu) / sigma))
        .collect();
    let ln_sigma = sigmas.iter().map(|s| s.ln()).collect();
    Kernels::Numerical {
        mus,
        sigmas,
        low,
        high,
        log,
        step,
        lo,
        hi,
        log_mass,
        ln_sigma,
    }
}

#[cfg(test)]
mod tests {
    use super::super::truncnorm::NORM_PDF_LOG_C;
    use super::*;

    #[test]
    fn weights_ramp_from_25() {
        assert!(default_weights(0).is_empty());
        assert_eq!(default_weights(24), vec![1.0; 24]);
        assert_eq!(default_weights(25), vec![1.0; 25]);
        let w = default_weights(26);
        assert_eq!(w[0], 1.0 / 26.0);
        assert_eq!(&w[1..], &[1.0; 25]);
        let w = default_weights(30);
        assert_eq!(w.len(), 30);
        assert_eq!(w[0], 1.0 / 30.0);
        assert_eq!(w[4], 1.0);
        assert!(w[..5].windows(2).all(|p| p[0] < p[1]));
    }

    #[test]
    fn prior_only_is_the_whole_range() {
        let d = Distribution::Float {
            low: 0.0,
            high: 2.0,
            log: false,
            step: None,
        };
        let pe = ParzenEstimator::new(&d, &[], &ParzenParams::default());
        // N(1, 2) truncated to [0, 2], at its centre.
        let mass = super::super::truncnorm::log_gauss_mass(-0.5, 0.5);
        let want = -NORM_PDF_LOG_C - mass - 2f64.ln();
        assert!((pe.log_pdf(1.0) - want).abs() < 1e-12);
        assert_eq!(pe.log_pdf(2.5), f64::NEG_INFINITY);
    }

    #[test]
    fn categorical_rows_and_draws() {
        let d = Distribution::Categorical {
            choices: vec![crate::trial::Choice::Int(0); 3],
        };
        let pe = ParzenEstimator::new(&d, &[2.0, 2.0], &ParzenParams::default());
        // Kernels: (1/3, 1/3, 1/3 + 1) / 2 twice, then uniform; weights 1/3 each.
        let p2: f64 = (2.0 / 3.0) * (2.0 / 3.0) + (1.0 / 3.0) * (1.0 / 3.0);
        assert!((pe.log_pdf(2.0) - p2.ln()).abs() < 1e-12);
        let mut rng = Rng::new(0, super::super::rng::Stream::Tpe, 0, "c");
        let draws = pe.sample(&mut rng, 3000);
        let twos = draws.iter().filter(|&&x| x == 2.0).count() as f64 / 3000.0;
        assert!((twos - p2).abs() < 0.03, "{twos} vs {p2}");
    }

    /// Kernel k's log density at x worked out whole, as it was before the
    /// kernels kept their masses.
    fn direct(kernels: &Kernels, k: usize, x: f64) -> f64 {
        match kernels {
            Kernels::Categorical { rows, .. } => rows[k][x as usize].ln(),
            Kernels::Numerical {
                mus,
                sigmas,
                low,
                high,
                log,
                step,
                ..
            } => {
                let (mu, sigma) = (mus[k], sigmas[k]);
                let t = |v: f64| if *log { v.ln() } else { v };
                let s = step.unwrap_or(0.0);
                let (lo, hi) = (t(low - s / 2.0), t(high + s / 2.0));
                let all = log_gauss_mass((lo - mu) / sigma, (hi - mu) / sigma);
                if step.is_some() {
                    let cell = (t(x - s / 2.0) - mu) / sigma;
                    return log_gauss_mass(cell, (t(x + s / 2.0) - mu) / sigma) - all;
                }
                let (z, a, b) = ((t(x) - mu) / sigma, (lo - mu) / sigma, (hi - mu) / sigma);
                if z < a || z > b {
                    return f64::NEG_INFINITY;
                }
                -(z * z) / 2.0 - NORM_PDF_LOG_C - all - sigma.ln()
            }
        }
    }

    #[test]
    fn kept_masses_give_the_same_densities_to_the_bit() {
        let dists = [
            Distribution::Float {
                low: 1e-5,
                high: 1e-1,
                log: true,
                step: None,
            },
            Distribution::Int {
                low: 1,
                high: 64,
                log: false,
                step: 1,
            },
            Distribution::Categorical {
                choices: vec![crate::trial::Choice::Int(0); 5],
            },
            Distribution::Float {
                low: -2.0,
                high: 3.0,
                log: false,
                step: Some(0.25),
            },
            Distribution::Int {
                low: 2,
                high: 4096,
                log: true,
                step: 1,
            },
        ];
        let mut rng = Rng::new(7, super::super::rng::Stream::Tpe, 0, "bits");
        let draw = |d: &Distribution, rng: &mut Rng| {
            ParzenEstimator::new(d, &[], &ParzenParams::default()).sample(rng, 1)[0]
        };
        let obs: Vec<Vec<f64>> = dists
            .iter()
            .map(|d| (0..40).map(|_| draw(d, &mut rng)).collect())
            .collect();
        let dims: Vec<(&Distribution, &[f64])> =
            dists.iter().zip(&obs).map(|(d, o)| (d, &o[..])).collect();
        let pe = ParzenEstimator::joint(&dims, &ParzenParams::default());
        for _ in 0..50 {
            let x: Vec<f64> = dists.iter().map(|d| draw(d, &mut rng)).collect();
            let terms: Vec<f64> = (0..pe.weights.len())
                .map(|k| {
                    pe.weights[k].ln()
                        + pe.dims
                            .iter()
                            .zip(&x)
                            .map(|(kernels, &xi)| direct(kernels, k, xi))
                            .sum::<f64>()
                })
                .collect();
            let want = log_sum_exp(&terms);
            assert_eq!(pe.log_pdf_joint(&x).to_bits(), want.to_bits(), "at {x:?}");
        }
    }

    #[test]
    fn discrete_draws_stay_on_the_grid() {
        let d = Distribution::Int {
            low: 2,
            high: 11,
            log: false,
            step: 3,
        };
        let pe = ParzenEstimator::new(&d, &[5.0, 8.0, 8.0], &ParzenParams::default());
        let mut rng = Rng::new(0, super::super::rng::Stream::Tpe, 0, "i");
        for x in pe.sample(&mut rng, 500) {
            assert!([2.0, 5.0, 8.0, 11.0].contains(&x), "{x}");
        }
        // The probabilities of the grid points sum to one.
        let total: f64 = [2.0, 5.0, 8.0, 11.0]
            .iter()
            .map(|&x| pe.log_pdf(x).exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
    }
}
