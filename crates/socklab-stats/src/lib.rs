//! Pure statistics for socklab: sample summaries, Student-t confidence
//! intervals and Welch's unequal-variance t-test.
//!
//! The crate does no I/O and depends on no math library; everything is
//! implemented here:
//!
//! * `special`: log-gamma (Stirling series / Lanczos), log-beta and the
//!   regularized incomplete beta function (Lentz continued fraction plus the
//!   BGRAT asymptotic expansion);
//! * `incomplete_gamma`: regularized incomplete gamma functions and `erfc`;
//! * `normal`: the standard normal CDF and quantile;
//! * `student_t`: CDF, survival function, density and quantile of
//!   Student's t with real-valued degrees of freedom;
//! * `summary`: mean, standard deviation, type-7 quantiles, Student-t
//!   confidence intervals and the [`Summary`] record;
//! * `welch`: Welch's unequal-variance t-test;
//! * `bimodal`: whether repetitions fall into two clusters;
//! * `mann_whitney`: the Mann–Whitney U (rank-sum) test, exact or normal;
//! * `sample_size`: the repetitions a two-sample t-test needs for a given effect.
//!
//! No function panics. Sample statistics return `None` for empty or
//! non-finite input; distribution functions return `NaN` outside their
//! domain, as documented on each item.
//!
//! ```
//! use socklab_stats::{summarize, welch};
//!
//! let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
//! assert_eq!(s.mean, 5.0);
//! assert_eq!(s.median, 4.5);
//!
//! let w = welch(&[1.0, 2.0, 3.0, 4.0], &[3.0, 4.0, 5.0, 6.0]).unwrap();
//! assert_eq!(w.diff, 2.0);
//! assert!(!w.significant);
//! ```

mod bimodal;
mod incomplete_beta;
mod incomplete_gamma;
mod mann_whitney;
mod normal;
mod ratio;
mod sample_size;
mod special;
mod student_t;
mod summary;
mod welch;

pub use bimodal::{bimodal, Bimodal, BIMODAL_GAP_RATIO, BIMODAL_MIN_REL_GAP};
pub use incomplete_beta::regularized_incomplete_beta;
pub use incomplete_gamma::{erfc, regularized_gamma_p, regularized_gamma_q};
pub use mann_whitney::{mann_whitney, MannWhitney};
pub use normal::{normal_cdf, normal_quantile};
pub use ratio::{ratio_of_means, welch_n_to_decide, Ratio, RatioInterval};
pub use sample_size::{pooled_sd, precision_n, two_sample_n, MAX_SAMPLE_SIZE};
pub use special::{ln_beta, ln_gamma};
pub use student_t::{
    student_t_cdf, student_t_pdf, student_t_quantile, student_t_sf, student_t_two_sided_p,
};
pub use summary::{
    confidence_interval, log_confidence_interval, mean, median, quantile, relative_change, std_dev,
    summarize, CiMethod, Summary,
};
pub use welch::{welch, Welch};
