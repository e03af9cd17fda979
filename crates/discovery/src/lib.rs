//! warden's progressive discovery: tool search, manifest token counts, code mode and execution routing.
