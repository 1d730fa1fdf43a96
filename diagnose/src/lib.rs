//! The diagnosis of a training config and of a failed run, over `common`'s
//! config, estimate and formats (it imports them; they never import it, and
//! being a crate of its own makes the compiler hold that arrow):
//!
//! - `hazards`: each known hazard of a config with its check, its `--fix`
//!   and its `--explain` edits (one file per group of hazards);
//! - `keys`: the keys of a config cfgcheck did not define, as the hazards
//!   read them (which key means which setting in which format);
//! - `any_config`: any config file, trainguard's or not: its format
//!   recognised from its keys, the rules that apply, its `--fix`;
//! - `rules`: cfgcheck's rules, the hazards run against a config and its
//!   target, with what they could not judge;
//! - `plan`, `fix`: the config changes of `cfgcheck --fix` and `--fit`, and
//!   their application to the user's file;
//! - `yaml_edit`: in-place edits of a YAML file that keep its comments;
//! - `failures`: the known failures of PyTorch runs and how to tell them
//!   from a message (train's error_class, a sweep's classes, `--explain`);
//! - `explain`: `cfgcheck --explain`'s one-pass scanner of a log;
//! - `scan`: `cfgcheck --scan`, the same hazards found in Python code
//!   (tree-sitter), with the file and line of each half.
//!
//! Inside the crate the arrows go one way too: failures <- explain;
//! yaml_edit, plan, keys <- hazards <- rules, fix <- any_config; hazards <- scan.

pub mod any_config;
pub mod explain;
pub mod failures;
pub mod fix;
pub mod hazards;
pub mod keys;
pub mod knobs;
pub mod ladder;
pub mod plan;
pub mod rules;
pub mod scan;
pub mod yaml_edit;
