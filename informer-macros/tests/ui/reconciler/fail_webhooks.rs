use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validatng))]
struct MisspeltWebhook;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validating, failure_policy = "ignore"))]
struct BadPolicy;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(failure_policy = "Fail"))]
struct NothingDeclared;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(defaulting, defaulting))]
struct TwiceDefaulting;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validating, service = "Webhook_Service"))]
struct BadService;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhook(validating))]
struct MisspeltOption;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validating), webhooks(defaulting))]
struct TwoDeclarations;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validating, cert_dir = ""))]
struct EmptyCertDir;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validating, timeout_seconds = 31))]
struct TimeoutTooLong;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validating, timeout_seconds = 0))]
struct TimeoutZero;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validating, timeoutSeconds = 5))]
struct MisspeltTimeout;

fn main() {}
