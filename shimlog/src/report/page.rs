//! The page: the template (page.html) with its style (page.css), its script (page.js) and
//! the data inlined, so that the file is whole by itself.
use serde_json::Value;

const TEMPLATE: &str = include_str!("page.html");
const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

pub fn render(doc: &Value) -> Result<String, String> {
    let json = serde_json::to_string(doc).map_err(|e| e.to_string())?;
    // Inside <script> only "</" could end the element early; "<\/" is the same JSON string.
    let json = json.replace("</", "<\\/");
    let title = doc["title"].as_str().unwrap_or("shimlog report");
    Ok(TEMPLATE
        .replace("{{TITLE}}", &escape(title))
        .replace("{{STYLE}}", STYLE)
        .replace("{{SCRIPT}}", SCRIPT)
        .replace("{{DATA}}", &json))
}

/// Text for HTML: the five characters that could be markup.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_close_its_script() {
        let doc = serde_json::json!({"title": "<b>x</b>", "exe": "</script><script>alert(1)</script>"});
        let html = render(&doc).unwrap();
        assert_eq!(html.matches("</script>").count(), TEMPLATE.matches("</script>").count());
        assert!(html.contains("<title>&lt;b&gt;x&lt;/b&gt;"));
    }
}
