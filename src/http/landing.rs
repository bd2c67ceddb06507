//! The landing page at `/`: the GPUs at a glance and links to the endpoints.

use std::fmt::Write;

use crate::gpu::GpuStatus;

use super::routes::Readiness;
use super::HttpState;

/// Renders the page from the latest snapshot.
pub fn render(state: &HttpState) -> String {
    let snapshot = state.snapshots.borrow().clone();
    let mut page = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>gpuwatch</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}\
         .lost{color:#b00}</style></head><body><h1>gpuwatch</h1>",
    );
    let readiness = match Readiness::of(state) {
        Readiness::Ready => "ready".to_string(),
        Readiness::NotReady(reason) => format!("not ready: {reason}"),
    };
    let _ = write!(page, "<p>Status: {}</p>", escape(&readiness));
    match snapshot {
        None => page.push_str("<p>No sample yet.</p>"),
        Some(snapshot) => {
            let _ = write!(
                page,
                "<p>Host {} &middot; driver {} &middot; CUDA {}</p><table><tr><th>GPU</th><th>Name</th>\
                 <th>State</th><th>Utilization</th><th>Memory</th><th>Temperature</th><th>Power</th>\
                 <th>Processes</th></tr>",
                escape(&snapshot.hostname),
                escape(snapshot.system.driver_version.as_deref().unwrap_or("?")),
                escape(snapshot.system.cuda_driver_version.as_deref().unwrap_or("?")),
            );
            for gpu in &snapshot.gpus {
                let r = &gpu.readings;
                let state = match &gpu.status {
                    GpuStatus::Up => "up".to_string(),
                    GpuStatus::Lost { reason } => {
                        format!("<span class=\"lost\">lost ({})</span>", escape(reason))
                    }
                };
                let na = || "–".to_string();
                let _ = write!(
                    page,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    gpu.index,
                    escape(gpu.identity.name.as_deref().unwrap_or("?")),
                    state,
                    r.utilization_gpu_ratio.map_or_else(na, |u| format!("{:.0} %", u * 100.0)),
                    r.memory.map_or_else(na, |m| format!(
                        "{:.1} / {:.1} GiB",
                        m.used_bytes as f64 / 1073741824.0,
                        m.total_bytes as f64 / 1073741824.0
                    )),
                    r.temperature_gpu_celsius.map_or_else(na, |t| format!("{t:.0} °C")),
                    r.power_watts.map_or_else(na, |p| format!("{p:.0} W")),
                    gpu.processes.len(),
                );
            }
            page.push_str("</table>");
        }
    }
    page.push_str(
        "<p><a href=\"/metrics\">/metrics</a> &middot; <a href=\"/-/ready\">/-/ready</a> &middot; \
         <a href=\"/-/healthy\">/-/healthy</a> &middot; <a href=\"/api/v1/snapshot\">/api/v1/snapshot</a></p>\
         </body></html>\n",
    );
    page
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
