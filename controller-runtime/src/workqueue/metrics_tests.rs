//! Metrics tests: scrape a real registry.
