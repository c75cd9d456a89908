//! Loss models: independent/correlated random loss, Gilbert-Elliott and the
//! 4-state Markov model, following netem's `loss_event`, `loss_gilb_ell` and
//! `loss_4state`.

use crate::rng::{chance, prob_to_u32, CorrelatedRandom, Rng};

/// How packets are lost. All probabilities are fractions in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Loss {
    /// No loss.
    #[default]
    None,
    /// netem `loss P [CORR]`: each packet is lost with probability `p`, drawn
    /// from netem's correlated random source. As in netem, a non-zero
    /// correlation also narrows the spread of the random values, so the
    /// long-run loss rate is then not exactly `p`.
    Random {
        /// Loss probability.
        p: f64,
        /// Correlation with the previous random value.
        correlation: f64,
    },
    /// netem `loss gemodel p [r [1-h [1-k]]]`: Good→Bad with `p`, Bad→Good
    /// with `r`; a packet is lost with `one_minus_h` in Bad and `one_minus_k`
    /// in Good. Defaults: `r = 1 - p`, `1-h = 1`, `1-k = 0`.
    GilbertElliott {
        /// Good → Bad transition probability.
        p: f64,
        /// Bad → Good transition probability.
        r: f64,
        /// Loss probability in the Bad state.
        one_minus_h: f64,
        /// Loss probability in the Good state.
        one_minus_k: f64,
    },
    /// netem `loss state p13 [p31 [p32 [p23 [p14]]]]` (Salsano et al.):
    /// 1 = received in a gap, 2 = received in a burst, 3 = lost in a burst,
    /// 4 = isolated loss. Defaults: `p31 = 1 - p13`, `p32 = p23 = p14 = 0`.
    FourState {
        /// 1 → 3.
        p13: f64,
        /// 3 → 1.
        p31: f64,
        /// 3 → 2.
        p32: f64,
        /// 2 → 3.
        p23: f64,
        /// 1 → 4.
        p14: f64,
    },
}

impl Loss {
    /// The long-run loss fraction the model converges to (for `Random` with
    /// zero correlation, `p`; with correlation, netem's nominal `p`).
    pub fn stationary_loss_rate(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Random { p, .. } => p,
            Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                if p + r == 0.0 {
                    return one_minus_k;
                }
                let bad = p / (p + r);
                (1.0 - bad) * one_minus_k + bad * one_minus_h
            }
            Loss::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                // Power iteration on the transition matrix.
                let mut pi = [1.0, 0.0, 0.0, 0.0];
                for _ in 0..100_000 {
                    let next = [
                        pi[0] * (1.0 - p13 - p14) + pi[2] * p31 + pi[3],
                        pi[1] * (1.0 - p23) + pi[2] * p32,
                        pi[0] * p13 + pi[1] * p23 + pi[2] * (1.0 - p31 - p32),
                        pi[0] * p14,
                    ];
                    let delta: f64 = next.iter().zip(&pi).map(|(a, b)| (a - b).abs()).sum();
                    pi = next;
                    if delta < 1e-15 {
                        break;
                    }
                }
                pi[2] + pi[3]
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    GoodOrGap,
    BurstRx,
    BurstLost,
    IsolatedLost,
}

/// The running state of a [`Loss`] model.
#[derive(Debug, Clone)]
pub struct LossModel {
    loss: Loss,
    cor: CorrelatedRandom,
    state: State,
}

impl LossModel {
    /// A model in its initial (good / gap) state.
    pub fn new(loss: Loss) -> LossModel {
        let correlation = match loss {
            Loss::Random { correlation, .. } => correlation,
            _ => 0.0,
        };
        LossModel {
            loss,
            cor: CorrelatedRandom::new(correlation),
            state: State::GoodOrGap,
        }
    }

    /// Decides whether the next packet is lost.
    pub fn is_lost(&mut self, rng: &mut Rng) -> bool {
        match self.loss {
            Loss::None => false,
            Loss::Random { p, .. } => chance(prob_to_u32(p), self.cor.next(rng)),
            Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => match self.state {
                State::GoodOrGap => {
                    if chance(prob_to_u32(p), rng.next_u32()) {
                        self.state = State::BurstLost;
                    }
                    chance(prob_to_u32(one_minus_k), rng.next_u32())
                }
                _ => {
                    if chance(prob_to_u32(r), rng.next_u32()) {
                        self.state = State::GoodOrGap;
                    }
                    chance(prob_to_u32(one_minus_h), rng.next_u32())
                }
            },
            Loss::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                let u = rng.next_f64();
                match self.state {
                    State::GoodOrGap => {
                        if u < p14 {
                            self.state = State::IsolatedLost;
                            true
                        } else if u < p14 + p13 {
                            self.state = State::BurstLost;
                            true
                        } else {
                            false
                        }
                    }
                    State::BurstRx => {
                        if u < p23 {
                            self.state = State::BurstLost;
                            true
                        } else {
                            false
                        }
                    }
                    State::BurstLost => {
                        if u < p32 {
                            self.state = State::BurstRx;
                            false
                        } else if u < p32 + p31 {
                            self.state = State::GoodOrGap;
                            false
                        } else {
                            true
                        }
                    }
                    State::IsolatedLost => {
                        self.state = State::GoodOrGap;
                        false
                    }
                }
            }
        }
    }
}
