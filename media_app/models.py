"""media_app keeps no records of its own: photos live inline in the transcript's steps."""
