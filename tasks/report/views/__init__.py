"""One report view per method: ``<method>.view(result) -> dict`` of pre-formatted values for
the method's template block (``templates/methods/<method>.html.j2``)."""
