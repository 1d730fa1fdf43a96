//! What is trained and on what: the seeds' network, AdamW with its schedule
//! and loss scaler, and the datasets.

pub mod data;
pub mod net;
pub mod optim;
