#![recursion_limit = "256"]
//! openloop: an open-model (constant-rate) HTTP/1.1 load generator. See README.md.
pub mod clock;
pub mod config;
pub mod http;
pub mod pacer;
pub mod run;
pub mod schedule;
pub mod stats;
pub mod worker;
