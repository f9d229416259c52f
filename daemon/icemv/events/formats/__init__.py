"""One module per producer's wire format; each turns a decoded event into hints."""
