//! `ibi status`'s tests: the join of reports, records and the lock, and what is printed of it.

mod fixtures;
mod html;
mod join;
mod output;
