//! Who a person is across surfaces: the operator is one person whether at the console
//! (`console:local`) or through the operator token (`api:operator`), for who may answer and
//! for counting approvals.

use super::UserRef;

/// The operator at the console.
pub const CONSOLE_OPERATOR: &str = "console:local";
/// The operator through the operator token.
pub const API_OPERATOR: &str = "api:operator";

impl UserRef {
    /// The operator as the console knows them (`console:local`).
    pub fn operator() -> Self {
        Self(CONSOLE_OPERATOR.to_owned())
    }

    /// Whether this is the operator: at the console, or through the operator token. The two
    /// are one person, for who may answer and for counting approvals.
    pub fn is_operator(&self) -> bool {
        self.0 == CONSOLE_OPERATOR || self.0 == API_OPERATOR
    }

    /// Whether `self` and `other` are one person: the same id, or the operator under either.
    pub fn same_person(&self, other: &Self) -> bool {
        self == other || self.is_operator() && other.is_operator()
    }

    /// As [`UserRef::same_person`] with an id as stored (`approvals`, `answered_by`).
    pub fn is(&self, stored: &str) -> bool {
        self.0 == stored || self.is_operator() && (stored == CONSOLE_OPERATOR || stored == API_OPERATOR)
    }
}

/// Whether `users` names `user` (the operator under either of their ids).
pub fn lists(users: &[UserRef], user: &UserRef) -> bool {
    users.iter().any(|u| u.same_person(user))
}
