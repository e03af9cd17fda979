//! Real PDF files written byte by byte for the knowledge tests — pages of text in the standard Helvetica font, or pages with a drawing and no text at all (what a scan without OCR looks like) — and the `pdftotext` converter they are read with.

use crate::requirement::{self, Missing};

/// What one page holds.
#[derive(Debug, Clone, Copy)]
pub enum PdfPage<'a> {
    /// Lines of text, top to bottom.
    Text(&'a [&'a str]),
    /// A filled rectangle and no text layer.
    Drawing,
}

/// A PDF of these pages: a catalogue, a page tree, one content stream a page, a cross-reference
/// table with the true byte offsets.
pub fn pdf(pages: &[PdfPage<'_>]) -> Vec<u8> {
    let font = 3 + 2 * pages.len();
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {} >>",
            (0..pages.len())
                .map(|index| format!("{} 0 R", 3 + 2 * index))
                .collect::<Vec<_>>()
                .join(" "),
            pages.len()
        ),
    ];
    for (index, page) in pages.iter().enumerate() {
        let content = match page {
            PdfPage::Text(lines) => {
                let mut stream = String::from("BT /F1 12 Tf 72 720 Td 16 TL\n");
                for line in *lines {
                    let escaped = line
                        .replace('\\', "\\\\")
                        .replace('(', "\\(")
                        .replace(')', "\\)");
                    stream.push_str(&format!("({escaped}) Tj T*\n"));
                }
                stream.push_str("ET");
                stream
            }
            PdfPage::Drawing => "0.2 0.2 0.2 rg 72 400 300 300 re f".to_owned(),
        };
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R >> >> /Contents {} 0 R >>",
            4 + 2 * index
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned());
    let mut out = String::from("%PDF-1.4\n");
    let mut offsets = Vec::with_capacity(objects.len());
    for (index, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.push_str(&format!("{} 0 obj\n{object}\nendobj\n", index + 1));
    }
    let xref = out.len();
    out.push_str(&format!(
        "xref\n0 {}\n0000000000 65535 f \n",
        objects.len() + 1
    ));
    for offset in offsets {
        out.push_str(&format!("{offset:010} 00000 n \n"));
    }
    out.push_str(&format!(
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    ));
    out.into_bytes()
}

/// Poppler's `pdftotext`, the PDF converter the knowledge tests configure.
pub fn pdftotext() -> Result<(), Missing> {
    requirement::command_on_path(
        "pdftotext",
        &["-v"],
        "PDFs cannot be read; `scripts/setup-test-deps` installs poppler-utils (as root, from Debian's packages)",
    )
}
