//! A search space (space/v1), as `verify-fixes --space` reads it: config
//! keys (dotted for nested ones) to the values a sweep will try, in file
//! order. The values are config values of any type, judged when applied.

use super::Versioned;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Space {
    pub schema: String,
    /// Key -> list of values, in the file's order.
    pub parameters: serde_yaml::Mapping,
}

impl Versioned for Space {
    const SCHEMA: &'static str = "space/v1";
    fn example() -> Self {
        let list = |v: &[serde_yaml::Value]| serde_yaml::Value::Sequence(v.to_vec());
        let mut parameters = serde_yaml::Mapping::new();
        parameters.insert("batch_size".into(), list(&[8.into(), 16.into(), 32.into()]));
        parameters.insert(
            "memory_optimized".into(),
            list(&[true.into(), false.into()]),
        );
        Space {
            schema: Self::SCHEMA.into(),
            parameters,
        }
    }
}
