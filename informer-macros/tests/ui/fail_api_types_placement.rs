use controller_runtime::api_types;

#[api_types]
pub struct NotAModule;

#[api_types(strict)]
mod with_arguments {}

fn main() {}
