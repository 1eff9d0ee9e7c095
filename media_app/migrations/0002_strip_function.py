"""``tether_strip_media(jsonb)`` for PostgreSQL: a content list with the payload of every
image block replaced by ``~stripped~`` (media_app.stripping). It walks the stored jsonb
without rendering the payloads as text, which is what a naive read spends its time on. The
image blocks it visits are those media_app.blocks.image_blocks counts: the top level, and the
``content`` list of a top-level block. Anything but a list gives NULL (read as a stub).

SQLite gets its ``tether_strip_media(text)`` from Python on every connection instead.
"""

from django.db import migrations

CREATE = r"""
CREATE OR REPLACE FUNCTION tether_strip_media(c jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
  n int;
  m int;
  here text;
  -- An image block with a payload: what media_app.blocks.ImageBlock.payload accepts.
  has_payload constant text :=
    ' ? (@.type == "image" && @.source.data.type() == "string" && @.source.data != "")';
BEGIN
  -- Every use of the argument reads the whole stored value again (out of TOAST), so it is
  -- touched as few times as possible: once for its length, once per block until the block's
  -- payload is gone (after which c is a small value in memory).
  n := jsonb_path_query_first(c, 'strict $.size()', '{}', true)::int;
  IF n IS NULL THEN
    RETURN NULL;  -- not a list
  END IF;
  FOR i IN 0 .. n - 1 LOOP
    here := '$[' || i || ']';
    IF jsonb_path_exists(c, ('strict ' || here || has_payload)::jsonpath, '{}', true) THEN
      c := jsonb_set(c, ARRAY[i::text, 'source', 'data'], '"~stripped~"');
    ELSE
      m := jsonb_path_query_first(
        c,
        ('lax ' || here || ' ? (!(@.type == "image") && @.content.type() == "array").content.size()')::jsonpath,
        '{}',
        true
      )::int;
      FOR j IN 0 .. coalesce(m, 0) - 1 LOOP
        IF jsonb_path_exists(c, ('strict ' || here || '.content[' || j || ']' || has_payload)::jsonpath, '{}', true) THEN
          c := jsonb_set(c, ARRAY[i::text, 'content', j::text, 'source', 'data'], '"~stripped~"');
        END IF;
      END LOOP;
    END IF;
  END LOOP;
  RETURN c;
END
$fn$;
"""

DROP = "DROP FUNCTION IF EXISTS tether_strip_media(jsonb);"


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("media_app", "0001_initial")]

    operations = [migrations.RunPython(create, drop)]
