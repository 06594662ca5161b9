-- crawl-dedup registry, schema version 4: "earlier batch wins" under any commit order.
--
-- A commit finds the documents it keeps that a *later* batch (larger batch_id) registered a duplicate
-- of first: a concurrent run that committed first, or an hour run out of order. The earlier batch keeps
-- its document; the later batch's copy is retracted from the registry and recorded here, so that the
-- later batch is known to need a rerun (its published outputs still keep the copy). A commit of a batch
-- clears its own rows here: its rerun decided again against everything earlier.
CREATE TABLE registry_stale (
    batch_id          text COLLATE "C" NOT NULL,  -- the later batch whose copy was retracted
    doc_id            text COLLATE "C" NOT NULL,
    earlier_batch_id  text COLLATE "C" NOT NULL,  -- the batch whose document won
    earlier_doc_id    text COLLATE "C" NOT NULL,
    layer             text NOT NULL,
    flagged_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (batch_id, doc_id)
);
