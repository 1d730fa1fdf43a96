//! Validation metrics: MAE, RMSE and R² for regression; accuracy and macro F1
//! for classification.

use tch::{Kind, Tensor};

#[derive(Clone, Debug, Default)]
pub struct TaskMetrics {
    pub mae: Option<f64>,
    pub rmse: Option<f64>,
    pub r2: Option<f64>,
    pub accuracy: Option<f64>,
    pub macro_f1: Option<f64>,
}

pub fn regression(pred: &Tensor, target: &Tensor) -> TaskMetrics {
    let pred = pred.squeeze_dim(-1).to_kind(Kind::Double);
    let target = target.to_kind(Kind::Double);
    let err = &pred - &target;
    let mse = err.square().mean(Kind::Double).double_value(&[]);
    let var = (&target - target.mean(Kind::Double))
        .square()
        .mean(Kind::Double)
        .double_value(&[]);
    TaskMetrics {
        mae: Some(err.abs().mean(Kind::Double).double_value(&[])),
        rmse: Some(mse.sqrt()),
        r2: Some(if var > 0.0 { 1.0 - mse / var } else { f64::NAN }),
        ..Default::default()
    }
}

pub fn classification(logits: &Tensor, target: &Tensor, classes: i64) -> TaskMetrics {
    let pred = logits.argmax(-1, false);
    let correct = pred
        .eq_tensor(target)
        .to_kind(Kind::Double)
        .mean(Kind::Double)
        .double_value(&[]);
    let mut f1s = Vec::new();
    for k in 0..classes {
        let p = pred.eq(k);
        let t = target.eq(k);
        let tp = p.logical_and(&t).sum(Kind::Int64).int64_value(&[]) as f64;
        let fp = p
            .logical_and(&t.logical_not())
            .sum(Kind::Int64)
            .int64_value(&[]) as f64;
        let fneg = p
            .logical_not()
            .logical_and(&t)
            .sum(Kind::Int64)
            .int64_value(&[]) as f64;
        let denom = 2.0 * tp + fp + fneg;
        f1s.push(if denom > 0.0 { 2.0 * tp / denom } else { 0.0 });
    }
    TaskMetrics {
        accuracy: Some(correct),
        macro_f1: Some(f1s.iter().sum::<f64>() / f1s.len().max(1) as f64),
        ..Default::default()
    }
}
