//! Tests of `image-based-installation-config.yaml`: strict decoding, defaults, one table row per rule
//! asserting the rendered finding, and loading the directory with `post.sh`.

mod decode;
mod field_rules;
mod findings;
mod fixtures;
mod host_agent;
mod load;
mod status;
