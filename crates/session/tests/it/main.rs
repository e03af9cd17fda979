//! warden-session in process, over the mock model: sessions opened through the one opener,
//! the events every frontend reads, and what a frontend may do to the calls in flight.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod events;
mod opener;
mod support;
