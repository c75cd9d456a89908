//! The roles socklab runs as a process of its own: their main loops, and [`argv::RoleArgs`],
//! the one typed command line the lab starts them with. The binary parses its flags into a
//! role's configuration and calls the role here.

pub mod argv;

pub use argv::{Listen, Role, RoleArgs};
