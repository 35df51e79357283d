//! askgate's agent card, served without a token at `/.well-known/agent-card.json` (a client
//! reads it before it knows which credential to send): the JSON-RPC interface at `/a2a`, the
//! bearer scheme it takes (an askgate agent token), and three skills, all answered by a person.

use serde_json::{Value, json};

use super::wire::{JSONRPC_BINDING, PROTOCOL_VERSION};

/// The path of the JSON-RPC endpoint.
pub const ENDPOINT: &str = "/a2a";

/// The card, for an askgate whose public address is `base` (`https://askgate.example.com/`).
pub fn card(base: &str) -> Value {
    let url = format!("{}{ENDPOINT}", base.trim_end_matches('/'));
    let modes = json!(["text/plain", "application/json"]);
    let skill = |id: &str, name: &str, description: &str, example: &str| {
        json!({"id": id, "name": name, "description": description, "tags": ["human-in-the-loop"],
               "examples": [example], "inputModes": modes, "outputModes": modes})
    };
    json!({
        "name": "askgate",
        "description": "Asks a person and answers with what they said: a question, a confirmation or an \
            approval, shown on the chat, the email or the page where they are. The task stays working \
            while the person thinks (minutes or days) and completes with the answer as its artifact; a \
            decline is rejected, an expiry failed, a cancel canceled, each with the reason.",
        "supportedInterfaces": [{"url": url, "protocolBinding": JSONRPC_BINDING, "protocolVersion": PROTOCOL_VERSION}],
        "provider": {"organization": "askgate", "url": base},
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": false},
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "description": "an askgate agent token (ASKGATE_AGENT_TOKEN, or an [[agents]] entry's)"
        }}},
        "securityRequirements": [{"schemes": {"bearer": {}}}],
        "defaultInputModes": modes,
        "defaultOutputModes": modes,
        "skills": [
            skill("ask", "Ask a person",
                "A question in the message's text; a data part {\"options\": [..], \"multi\": true, \
                 \"allow_custom\": true} offers choices. The answer is the artifact.",
                "Which region should the new cluster go to?"),
            skill("confirm", "Confirm",
                "A yes/no question: the text, with a data part {\"kind\": \"confirm\"}. The artifact's \
                 value is true or false.",
                "Archive all 87 emails?"),
            skill("approve", "Approve an action",
                "An action a person allows or rejects: the text, with a data part {\"kind\": \"approval\"}. \
                 Completed with once or always when allowed; rejected with their words when not.",
                "rm -rf build"),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_reads_as_an_a2a_agent_card_with_its_endpoint() {
        let card: super::super::wire::AgentCard =
            serde_json::from_value(card("http://127.0.0.1:8080/")).expect("an agent card");
        assert_eq!(card.supported_interfaces[0].url, "http://127.0.0.1:8080/a2a");
        let skills: Vec<&str> = card.skills.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(skills, ["ask", "confirm", "approve"]);
    }
}
