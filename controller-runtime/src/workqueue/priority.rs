//! Priorities: ready items are served highest priority first, FIFO within a
//! priority.
//!
//! Every [`Queue`](super::Queue) is a priority queue; plain
//! [`Queue::add`](super::Queue::add) uses
//! [`Priority::NORMAL`], so a queue that never sees another priority is a
//! plain FIFO. The convention controllers follow (as controller-runtime's
//! priority queue does): adds caused by an informer's initial list and by
//! resyncs go in at [`Priority::LOW`], so that a restart or a resync of
//! thousands of unchanged objects does not starve the real changes that
//! arrive at the same time.
//!
//! Re-adding a pending item keeps the highest priority and the earliest ready
//! time of all its adds; an item whose priority rises moves to the tail of
//! its new priority's line.

use std::time::Duration;

/// How urgently an item should be processed; higher is served first.
///
/// ```
/// use controller_runtime::workqueue::Priority;
/// assert!(Priority::HIGH > Priority::NORMAL);
/// assert!(Priority::NORMAL > Priority::LOW);
/// assert_eq!(Priority::default(), Priority::NORMAL);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(pub i32);

impl Priority {
    /// For adds from initial lists and resyncs (controller-runtime's
    /// `LowPriority`, -100).
    pub const LOW: Priority = Priority(-100);
    /// The priority of [`Queue::add`](super::Queue::add).
    pub const NORMAL: Priority = Priority(0);
    /// For items that should jump ahead of normal work.
    pub const HIGH: Priority = Priority(100);

    /// The priority for an add caused by an informer notification:
    /// [`Priority::LOW`] for initial-list adds and resyncs, else
    /// [`Priority::NORMAL`].
    ///
    /// ```
    /// use controller_runtime::workqueue::Priority;
    /// assert_eq!(Priority::for_event(true), Priority::LOW);
    /// assert_eq!(Priority::for_event(false), Priority::NORMAL);
    /// ```
    #[must_use]
    pub fn for_event(initial_list_or_resync: bool) -> Priority {
        if initial_list_or_resync {
            Priority::LOW
        } else {
            Priority::NORMAL
        }
    }
}

/// Options for [`Queue::add_with`](super::Queue::add_with): priority,
/// delay, rate limiting.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::{AddOptions, Priority};
/// let opts = AddOptions::new().priority(Priority::LOW).after(Duration::from_secs(1));
/// assert_eq!(opts.get_priority(), Priority::LOW);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct AddOptions {
    pub(super) priority: Priority,
    pub(super) after: Duration,
    pub(super) rate_limited: bool,
}

impl AddOptions {
    /// Normal priority, no delay, not rate limited: the same as
    /// [`Queue::add`](super::Queue::add).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Makes the item ready only after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.after = delay;
        self
    }

    /// Also asks the queue's rate limiter; the item waits for the longer of
    /// the limiter's delay and [`AddOptions::after`].
    pub fn rate_limited(mut self) -> Self {
        self.rate_limited = true;
        self
    }

    /// The priority these options add with.
    #[must_use]
    pub fn get_priority(&self) -> Priority {
        self.priority
    }
}
