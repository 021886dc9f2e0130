//! `kubectl liqo domain add|list|remove`: SearchDomains, the DNS domains browsed for peers.

use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use liqo_api::{SearchDomain, SearchDomainSpec};
use serde::Serialize;

use crate::error::{CliError, Result};
use crate::render::{self, Output};

/// A SearchDomain as `domain list` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Domain {
    pub name: String,
    pub domain: String,
    pub autojoin: Option<bool>,
    pub ready: String,
    pub reason: String,
    pub message: String,
    pub found: Vec<String>,
}

impl Domain {
    pub fn of(sd: &SearchDomain) -> Self {
        let status = sd.status.clone().unwrap_or_default();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        Self {
            name: sd.metadata.name.clone().unwrap_or_default(),
            domain: sd.spec.domain.clone(),
            autojoin: sd.spec.autojoin,
            ready: ready.map_or("Unknown".into(), |c| c.status.clone()),
            reason: ready.map_or("-".into(), |c| c.reason.clone()),
            message: ready.map_or(String::new(), |c| c.message.clone()),
            found: status.foreign_clusters.iter().map(|f| f.foreign_cluster.clone()).collect(),
        }
    }
}

/// The domains as a table or structured.
pub fn render(domains: &[Domain], output: Output) -> String {
    match output {
        Output::Json | Output::Yaml => render::structured(&domains, output),
        _ => {
            let mut header = vec!["NAME", "DOMAIN", "AUTOJOIN", "READY", "REASON", "FOUND"];
            if output == Output::Wide {
                header.push("MESSAGE");
            }
            let rows: Vec<Vec<String>> = domains
                .iter()
                .map(|d| {
                    let mut row = vec![
                        d.name.clone(),
                        d.domain.clone(),
                        d.autojoin.map_or("default".into(), |a| a.to_string()),
                        d.ready.clone(),
                        d.reason.clone(),
                        if d.found.is_empty() { "-".into() } else { d.found.join(",") },
                    ];
                    if output == Output::Wide {
                        row.push(d.message.clone());
                    }
                    row
                })
                .collect();
            render::table(&header, &rows)
        }
    }
}

pub async fn add(client: &Client, domain: &str, name: Option<&str>, autojoin: Option<bool>) -> Result<String> {
    let name = name.map(str::to_owned).unwrap_or_else(|| domain.trim_end_matches('.').to_lowercase());
    let sd = SearchDomain::new(&name, SearchDomainSpec { domain: domain.to_owned(), autojoin });
    Api::<SearchDomain>::all(client.clone())
        .create(&PostParams::default(), &sd)
        .await
        .map_err(|e| CliError::api(format!("creating SearchDomain {name}"), e))?;
    Ok(name)
}

pub async fn list(client: &Client) -> Result<Vec<Domain>> {
    let all = Api::<SearchDomain>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| CliError::api("listing SearchDomains", e))?;
    let mut out: Vec<Domain> = all.items.iter().map(Domain::of).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Removes the SearchDomain named `domain`, or browsing `domain`; the ForeignClusters it found
/// go with it (they are owned by it).
pub async fn remove(client: &Client, domain: &str) -> Result<String> {
    let api = Api::<SearchDomain>::all(client.clone());
    let name = match api.get_opt(domain).await.map_err(|e| CliError::api(format!("reading SearchDomain {domain}"), e))? {
        Some(_) => domain.to_owned(),
        None => list(client)
            .await?
            .into_iter()
            .find(|d| d.domain.trim_end_matches('.') == domain.trim_end_matches('.'))
            .map(|d| d.name)
            .ok_or(CliError::NotFound { what: format!("domain {domain}"), hint: "kubectl liqo domain list shows them" })?,
    };
    api.delete(&name, &DeleteParams::default()).await.map_err(|e| CliError::api(format!("deleting SearchDomain {name}"), e))?;
    Ok(name)
}
