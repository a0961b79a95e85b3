//! Black-box tests of the built `telltale` binary: each test starts the real server on a
//! temporary data dir (see `harness`) and talks HTTP to it, as an integrator, a browser, an
//! operator and a data scientist would.

mod harness;
mod stores;

mod backup;
mod browser;
mod cli;
mod cohort;
mod collector;
mod context;
mod deletion;
mod desk;
mod drain;
mod durability;
mod embed;
mod evidence;
mod faults;
mod fleet;
mod fleet_guarantees;
mod fuzz;
mod lake;
mod limits;
mod logs;
mod lookup;
mod openapi_fuzz;
mod operations;
mod outage;
mod provisioning;
mod proxy;
mod quality;
mod rate_limit;
mod replay;
mod review;
mod routes;
mod s3_lake;
mod scoring;
mod start;
mod tombstone;
mod upgrade;
