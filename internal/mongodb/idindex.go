package mongodb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the driver FerretDB's SQLite backend also registers
)

// FerretDB 1.24's SQLite backend stores each document as JSON in the
// column _ferretdb_sjson and answers a filter that is exactly {_id:
// <string or ObjectId>} with
//
//	WHERE _ferretdb_sjson->'$._id' = ?
//
// but builds its own _id index on _ferretdb_sjson->"_id". SQLite uses an
// expression index only for the very same expression, so that index is
// never used, and every lookup by _id reads and parses every row of the
// collection: about 45 ms at 10,000 documents here. indexIDs adds an
// index on the expression the filter uses. FerretDB does not know of it
// (its metadata lists only its own indexes), SQLite keeps it up to date on
// every write, and dropping the collection drops it with the table.

// idIndexSuffix names the added index after its table; FerretDB names its
// own indexes "<table>_<name>_", so the names cannot clash.
const idIndexSuffix = "__flowbox_id_expr"

// idIndexEvery is how often the embedded database looks for collections
// created since, whose tables lack the index.
const idIndexEvery = 10 * time.Second

// IndexIDs gives every collection of every database in the data
// directory the index its lookups by _id need (see above); those that
// have it are left alone. The engine calls it once its collections exist;
// the embedded database also calls it every few seconds for collections
// created later.
func (e *Embedded) IndexIDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(e.dir, "*.sqlite"))
	if err != nil {
		return fmt.Errorf("index _id lookups: %w", err)
	}
	var errs []error
	for _, f := range files {
		if err := indexIDs(ctx, f); err != nil {
			errs = append(errs, fmt.Errorf("index _id lookups in %s: %w", filepath.Base(f), err))
		}
	}
	return errors.Join(errs...)
}

// indexIDs adds the missing _id expression indexes of one database file.
func indexIDs(ctx context.Context, file string) error {
	// mode=rw: a file just dropped must not be created again.
	// busy_timeout: FerretDB may hold the write lock for a moment.
	uri := (&url.URL{Scheme: "file", Path: filepath.ToSlash(file), RawQuery: "mode=rw&_pragma=busy_timeout(10000)"}).String()
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	missing, err := tablesWithoutIDIndex(ctx, db)
	if err != nil {
		if _, serr := os.Stat(file); errors.Is(serr, fs.ErrNotExist) {
			return nil // the database was dropped meanwhile
		}
		return err
	}
	for _, table := range missing {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (_ferretdb_sjson->'$._id')`, table+idIndexSuffix, table)
		if _, err := db.ExecContext(ctx, q); err != nil && !isNoSuchTable(err) {
			// A table dropped since the listing needs no index.
			return fmt.Errorf("index table %s: %w", table, err)
		}
	}
	return nil
}

// tablesWithoutIDIndex lists the collection tables of db that lack the
// index. A file whose metadata table does not exist yet has none.
func tablesWithoutIDIndex(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `
		SELECT c.table_name FROM "_ferretdb_collections" AS c
		WHERE NOT EXISTS (SELECT 1 FROM sqlite_master AS m WHERE m.type = 'index' AND m.name = c.table_name || ?)`,
		idIndexSuffix)
	if err != nil {
		if isNoSuchTable(err) {
			return nil, nil
		}
		return nil, err
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		tables = append(tables, t)
	}
	return tables, rows.Err()
}

func isNoSuchTable(err error) bool { return strings.Contains(err.Error(), "no such table") }

// indexIDsEvery runs IndexIDs at once and then every idIndexEvery, until
// ctx is done.
func (e *Embedded) indexIDsEvery(ctx context.Context, logger *slog.Logger) {
	t := time.NewTicker(idIndexEvery)
	defer t.Stop()
	for {
		if err := e.IndexIDs(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("embedded database: lookups by _id stay slow", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
