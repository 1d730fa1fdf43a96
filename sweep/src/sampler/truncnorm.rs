//! The truncated normal's log density, log mass and quantile function as
//! Optuna's `_truncnorm` computes them (itself from SciPy), so TPE's
//! densities agree with Optuna's to rounding. erf/erfc are FreeBSD msun's
//! (what CPython's math module and Optuna's `_erf` use): std has none on
//! stable Rust, and one more dependency for two functions is not worth it.

// The coefficients as msun prints them (20 digits), so they can be checked
// against s_erf.c line by line.
#![allow(clippy::excessive_precision)]

use std::f64::consts::{PI, SQRT_2};

const ERX: f64 = 8.45062911510467529297e-01;
const EFX: f64 = 1.28379167095512586316e-01;
const PP: [f64; 5] = [
    1.28379167095512558561e-01,
    -3.25042107247001499370e-01,
    -2.84817495755985104766e-02,
    -5.77027029648944159157e-03,
    -2.37630166566501626084e-05,
];
const QQ: [f64; 5] = [
    3.97917223959155352819e-01,
    6.50222499887672944485e-02,
    5.08130628187576562776e-03,
    1.32494738004321644526e-04,
    -3.96022827877536812320e-06,
];
const PA: [f64; 7] = [
    -2.36211856075265944077e-03,
    4.14856118683748331666e-01,
    -3.72207876035701323847e-01,
    3.18346619901161753674e-01,
    -1.10894694282396677476e-01,
    3.54783043256182359371e-02,
    -2.16637559486879084300e-03,
];
const QA: [f64; 6] = [
    1.06420880400844228286e-01,
    5.40397917702171048937e-01,
    7.18286544141962662868e-02,
    1.26171219808761642112e-01,
    1.36370839120290507362e-02,
    1.19844998467991074170e-02,
];
const RA: [f64; 8] = [
    -9.86494403484714822705e-03,
    -6.93858572707181764372e-01,
    -1.05586262253232909814e01,
    -6.23753324503260060396e01,
    -1.62396669462573470355e02,
    -1.84605092906711035994e02,
    -8.12874355063065934246e01,
    -9.81432934416914548592e00,
];
const SA: [f64; 8] = [
    1.96512716674392571292e01,
    1.37657754143519042600e02,
    4.34565877475229228821e02,
    6.45387271733267880336e02,
    4.29008140027567833386e02,
    1.08635005541779435134e02,
    6.57024977031928170135e00,
    -6.04244152148580987438e-02,
];
const RB: [f64; 7] = [
    -9.86494292470009928597e-03,
    -7.99283237680523006574e-01,
    -1.77579549177547519889e01,
    -1.60636384855821916062e02,
    -6.37566443368389627722e02,
    -1.02509513161107724954e03,
    -4.83519191608651397019e02,
];
const SB: [f64; 7] = [
    3.03380607434824582924e01,
    3.25792512996573918826e02,
    1.53672958608443695994e03,
    3.19985821950859553908e03,
    2.55305040643316442583e03,
    4.74528541206955367215e02,
    -2.24409524465858183362e01,
];

/// c[0] + c[1]·x + ... (Horner).
fn poly(c: &[f64], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &k| acc * x + k)
}

/// 1 + c[0]·x + c[1]·x² + ...
fn poly1(c: &[f64], x: f64) -> f64 {
    1.0 + x * poly(c, x)
}

/// exp(-x² - 0.5625 + R/S) / x for x >= 1.25, split as msun does so the
/// x² is exact.
fn erfc_tail(ax: f64) -> f64 {
    let s = 1.0 / (ax * ax);
    let rs = if ax < 1.0 / 0.35 {
        poly(&RA, s) / poly1(&SA, s)
    } else {
        poly(&RB, s) / poly1(&SB, s)
    };
    let z = f64::from_bits(ax.to_bits() & 0xffff_ffff_0000_0000);
    (-z * z - 0.5625).exp() * ((z - ax) * (z + ax) + rs).exp() / ax
}

pub(crate) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    if ax < 0.84375 {
        if ax < 2f64.powi(-28) {
            return x + EFX * x;
        }
        let z = x * x;
        return x + x * (poly(&PP, z) / poly1(&QQ, z));
    }
    if ax < 1.25 {
        let s = ax - 1.0;
        let pq = poly(&PA, s) / poly1(&QA, s);
        return if x >= 0.0 { ERX + pq } else { -ERX - pq };
    }
    if ax >= 6.0 {
        return 1f64.copysign(x);
    }
    let r = erfc_tail(ax);
    if x >= 0.0 {
        1.0 - r
    } else {
        r - 1.0
    }
}

pub(crate) fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    if ax < 0.84375 {
        if ax < 2f64.powi(-56) {
            return 1.0 - x;
        }
        let z = x * x;
        let y = poly(&PP, z) / poly1(&QQ, z);
        if x < 0.25 {
            return 1.0 - (x + x * y);
        }
        return 0.5 - (x * y + (x - 0.5));
    }
    if ax < 1.25 {
        let s = ax - 1.0;
        let pq = poly(&PA, s) / poly1(&QA, s);
        return if x >= 0.0 {
            1.0 - ERX - pq
        } else {
            1.0 + (ERX + pq)
        };
    }
    if ax < 28.0 {
        if x < -6.0 {
            return 2.0;
        }
        let r = erfc_tail(ax);
        return if x > 0.0 { r } else { 2.0 - r };
    }
    if x > 0.0 {
        0.0
    } else {
        2.0
    }
}

/// Φ(a), with erfc in the tails (Optuna's `_ndtr_single`).
fn ndtr_single(a: f64) -> f64 {
    let x = a / SQRT_2;
    if x < -1.0 / SQRT_2 {
        0.5 * erfc(-x)
    } else if x < 1.0 / SQRT_2 {
        0.5 + 0.5 * erf(x)
    } else {
        1.0 - 0.5 * erfc(x)
    }
}

/// Φ(a) through erf only (Optuna's vectorised `_ndtr`, used in the central
/// case of the mass).
fn ndtr(a: f64) -> f64 {
    0.5 + 0.5 * erf(a / SQRT_2)
}

/// log Φ(a), with the asymptotic series below -20.
pub(crate) fn log_ndtr(a: f64) -> f64 {
    if a > 6.0 {
        return -ndtr_single(-a);
    }
    if a > -20.0 {
        return ndtr_single(a).ln();
    }
    let log_lhs = -0.5 * a * a - (-a).ln() - 0.5 * (2.0 * PI).ln();
    let (mut last, mut rhs) = (0.0f64, 1.0f64);
    let (mut numerator, mut denom_factor, mut sign) = (1.0, 1.0, 1.0);
    let denom_cons = 1.0 / (a * a);
    let mut i = 0.0;
    while (last - rhs).abs() > f64::EPSILON {
        i += 1.0;
        last = rhs;
        sign = -sign;
        denom_factor *= denom_cons;
        numerator *= 2.0 * i - 1.0;
        rhs += sign * numerator * denom_factor;
    }
    log_lhs + rhs.ln()
}

/// log(e^p - e^q) for p >= q.
fn log_diff(p: f64, q: f64) -> f64 {
    p + (-(q - p).exp()).ln_1p()
}

/// numpy's logaddexp.
fn log_sum(p: f64, q: f64) -> f64 {
    if p == q {
        return p + std::f64::consts::LN_2;
    }
    let m = p.max(q);
    m + (-(p - q).abs()).exp().ln_1p()
}

/// log of the standard normal's mass on [a, b], worked in the left tail
/// where Φ is accurate.
pub(crate) fn log_gauss_mass(a: f64, b: f64) -> f64 {
    if b <= 0.0 {
        log_diff(log_ndtr(b), log_ndtr(a))
    } else if a > 0.0 {
        log_diff(log_ndtr(-a), log_ndtr(-b))
    } else {
        (-ndtr(a) - ndtr(-b)).ln_1p()
    }
}

pub(crate) const NORM_PDF_LOG_C: f64 = 0.918_938_533_204_672_8; // ln √(2π)

/// x with log Φ(x) = y, by Newton's method from Optuna's initial guesses.
fn ndtri_exp(y: f64) -> f64 {
    let flipped = y > -1e-2;
    let z = if flipped { (-y.exp_m1()).ln() } else { y };
    let mut x = if z < -5.0 {
        -(-2.0 * (z + NORM_PDF_LOG_C)).sqrt()
    } else {
        -(3f64.sqrt() / PI) * (-z).exp_m1().ln()
    };
    for _ in 0..100 {
        let log_ndtr_x = log_ndtr(x);
        let log_norm_pdf_x = -0.5 * x * x - NORM_PDF_LOG_C;
        let dx = (log_ndtr_x - z) * (log_ndtr_x - log_norm_pdf_x).exp();
        x -= dx;
        if dx.abs() < 1e-8 * x.abs() {
            break;
        }
    }
    if flipped {
        -x
    } else {
        x
    }
}

/// The quantile q of the standard normal truncated to [a, b].
pub(crate) fn ppf(q: f64, a: f64, b: f64) -> f64 {
    if a == b {
        return f64::NAN;
    }
    if q == 0.0 {
        return a;
    }
    if q == 1.0 {
        return b;
    }
    let log_mass = log_gauss_mass(a, b);
    if a < 0.0 {
        ndtri_exp(log_sum(log_ndtr(a), q.ln() + log_mass))
    } else {
        -ndtri_exp(log_sum(log_ndtr(-b), (-q).ln_1p() + log_mass))
    }
}

/// log density of N(loc, scale²) truncated to [loc + a·scale,
/// loc + b·scale] (SciPy's parametrisation) at z = (x - loc) / scale,
/// given what depends on the distribution alone: `log_mass` =
/// log_gauss_mass(a, b) and `ln_scale` (a mixture's kernels work them out
/// once, not once a point).
pub(crate) fn logpdf_z(z: f64, a: f64, b: f64, log_mass: f64, ln_scale: f64) -> f64 {
    if a == b {
        return f64::NAN;
    }
    if z < a || z > b {
        return f64::NEG_INFINITY;
    }
    -(z * z) / 2.0 - NORM_PDF_LOG_C - log_mass - ln_scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }

    #[test]
    fn erf_erfc_match_cpython() {
        // math.erf / math.erfc from CPython 3 (msun), printed with repr.
        let cases = [
            (1e-30, 1.1283791670955127e-30, 1.0),
            (0.1, 0.1124629160182849, 0.8875370839817152),
            (0.3, 0.3286267594591274, 0.6713732405408726),
            (-0.5, -0.5204998778130465, 1.5204998778130465),
            (1.0, 0.8427007929497149, 0.15729920705028513),
            (-1.2, -0.9103139782296353, 1.9103139782296354),
            (1.3, 0.9340079449406524, 0.06599205505934755),
            (2.0, 0.9953222650189527, 0.004677734981047265),
            (-2.9, -0.9999589021219005, 1.9999589021219006),
            (3.5, 0.9999992569016276, 7.430983723414128e-07),
            (-4.0, -0.9999999845827421, 1.999999984582742),
            (5.5, 0.9999999999999927, 7.357847917974398e-15),
            (-7.0, -1.0, 2.0),
            (10.0, 1.0, 2.088487583762545e-45),
        ];
        for (x, e, c) in cases {
            assert!(close(erf(x), e, 1e-15), "erf({x}) = {}", erf(x));
            assert!(close(erfc(x), c, 1e-14), "erfc({x}) = {}", erfc(x));
        }
    }

    #[test]
    fn ppf_inverts_the_mass() {
        for (a, b) in [
            (-1.0, 2.0),
            (0.5, 3.0),
            (-30.0, -25.0),
            (-3.0, -1.0),
            (2.0, 40.0),
        ] {
            for q in [1e-6, 0.1, 0.5, 0.9, 1.0 - 1e-6] {
                let x = ppf(q, a, b);
                assert!((a..=b).contains(&x), "ppf({q}, {a}, {b}) = {x}");
                let below = if a < 0.0 {
                    log_gauss_mass(a, x)
                } else {
                    // Mass on [a, x] = total - mass on [x, b].
                    log_diff(log_gauss_mass(a, b), log_gauss_mass(x, b))
                };
                assert!(
                    close(below - log_gauss_mass(a, b), q.ln(), 1e-6),
                    "{q} {a} {b}"
                );
            }
        }
    }

    #[test]
    fn log_ndtr_is_continuous_across_branches() {
        for a in [-20.0f64, 6.0] {
            let l = log_ndtr(a - 1e-9);
            let r = log_ndtr(a + 1e-9);
            assert!(close(l, r, 1e-6), "{a}: {l} {r}");
        }
    }
}
