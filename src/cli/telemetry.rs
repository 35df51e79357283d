//! What askgate tells operators about itself: log lines on stderr (text or JSON), and, when an
//! OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; off otherwise), traces over OTLP/HTTP: a span per HTTP
//! request and per question asked, counted or resolved, with the run and question ids as
//! attributes.
//!
//! The spans of target `askgate::otel` are for traces only: the log layer does not see them,
//! so log lines read the same with tracing on or off.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{EnvFilter, filter_fn};
use tracing_subscriber::prelude::*;

/// The exporter to flush at exit, when traces are exported.
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

/// The variables that name where traces go, most specific first.
const ENDPOINTS: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// Starts logging (`json` or text, at `default_filter` unless `RUST_LOG` says otherwise) and,
/// with `traces` and an endpoint configured, the trace exporter.
pub fn init(json: bool, default_filter: &str, traces: bool) -> Telemetry {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // When stderr's reader is gone (`askgate serve 2>&1 | tee log`, then Ctrl-C, which stops
        // tee too), a log line cannot be written; the default reports that with `eprintln!`,
        // which panics on the same closed pipe, and the panic left askgate waiting on stdin.
        .log_internal_errors(false);
    let fmt = if json {
        fmt.json().flatten_event(true).with_current_span(false).with_span_list(false).boxed()
    } else {
        // Colours only for a person at a terminal, not in files and journals.
        fmt.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).boxed()
    };
    let logs =
        fmt.with_filter(filter()).with_filter(filter_fn(|meta| !(meta.is_span() && meta.target() == "askgate::otel")));
    let endpoint = ENDPOINTS.iter().find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()));
    let provider = match endpoint {
        Some(endpoint) if traces => match exporter() {
            Ok(provider) => Some((provider, endpoint)),
            Err(e) => {
                eprintln!("askgate: traces are not exported to {endpoint}: {e}");
                None
            }
        },
        _ => None,
    };
    let traces_layer = provider.as_ref().map(|(provider, _)| {
        tracing_opentelemetry::layer().with_tracer(provider.tracer("askgate")).with_filter(filter())
    });
    tracing_subscriber::registry().with(logs).with(traces_layer).init();
    if let Some((_, endpoint)) = &provider {
        tracing::info!(endpoint = %endpoint, "traces exported over OTLP/HTTP");
    }
    Telemetry { traces: provider.map(|(provider, _)| provider) }
}

/// A batch exporter over OTLP/HTTP (protobuf), configured by the standard `OTEL_*` variables;
/// the service is `askgate` unless `OTEL_SERVICE_NAME` names another.
fn exporter() -> Result<SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_http().build()?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("askgate");
    }
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build())
}

impl Telemetry {
    /// Sends the spans not yet sent (at exit).
    pub fn flush(self) {
        if let Some(provider) = self.traces
            && let Err(e) = provider.shutdown()
        {
            eprintln!("askgate: the last traces were not exported: {e}");
        }
    }
}
