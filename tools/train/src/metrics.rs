//! Validation metrics: MAE, RMSE and R² for regression; accuracy, macro F1 and
//! class counts for classification.

use serde::Serialize;
use std::collections::BTreeMap;
use tch::{Kind, Tensor};

#[derive(Clone, Debug, Default, Serialize)]
pub struct TaskMetrics {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mae: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rmse: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r2: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub macro_f1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_counts: Option<BTreeMap<i64, i64>>,
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
    let mut counts = BTreeMap::new();
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
        counts.insert(k, t.sum(Kind::Int64).int64_value(&[]));
        let denom = 2.0 * tp + fp + fneg;
        f1s.push(if denom > 0.0 { 2.0 * tp / denom } else { 0.0 });
    }
    TaskMetrics {
        accuracy: Some(correct),
        macro_f1: Some(f1s.iter().sum::<f64>() / f1s.len().max(1) as f64),
        class_counts: Some(counts),
        ..Default::default()
    }
}
