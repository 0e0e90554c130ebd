package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine"
	"github.com/flowbox/flowbox/web/account"
)

const userUsage = `usage: engine user <command> [flags]

  add [-role user|admin] [-invite] NAME
                                   create an account; the password is read from standard input
                                   (one line), or made up and printed when the input is empty;
                                   -invite prints a one-time set-password link instead
  list                             list the accounts
  disable NAME | enable NAME       switch an account off (its sessions end, its keys are refused) or on
  reset-password [-invite] NAME    set a new password (read or made up as for add); all sessions end.
                                   -invite prints a one-time set-password link instead; the password
                                   and sessions stay until the link is used

A link is a path (/set-password/...): put the server's address in front, and give it to the
person over a safe channel; it works once, for 72 hours.

On the embedded database, stop engine serve first (or use the admin page): the database files
belong to the process that opened them.`

// user manages accounts from a shell, for operators and for the first
// admin of a headless server. It needs only the database.
func user(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(userUsage)
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("user "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	role := fs.String("role", string(auth.RoleUser), "user or admin")
	invite := fs.Bool("invite", false, "print a one-time set-password link instead of setting a password")
	// Flags may come before or after the name.
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return fmt.Errorf("%w\n\n%s", err, userUsage)
		}
		if fs.NArg() == 0 {
			break
		}
		names, args = append(names, fs.Arg(0)), fs.Args()[1:]
	}
	if *invite && cmd != "add" && cmd != "reset-password" {
		return fmt.Errorf("-invite is for add and reset-password\n\n%s", userUsage)
	}
	wantArgs := 1
	if cmd == "list" {
		wantArgs = 0
	}
	switch cmd {
	case "add", "list", "disable", "enable", "reset-password":
	default:
		return fmt.Errorf("unknown command %q\n\n%s", cmd, userUsage)
	}
	if len(names) != wantArgs {
		return fmt.Errorf("engine user %s takes %d argument(s), got %d\n\n%s", cmd, wantArgs, len(names), userUsage)
	}
	cfg, log, err := setup()
	if err != nil {
		return err
	}
	db, closeDB, _, err := engine.OpenMongo(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	accounts := auth.New(db)
	var name string
	if len(names) > 0 {
		name = strings.ToLower(strings.TrimSpace(names[0]))
	}
	id := "u:" + name

	switch cmd {
	case "list":
		users, err := accounts.Users(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tROLE\tSTATE\tCREATED")
		for _, u := range users {
			state := "active"
			if u.Disabled {
				state = "disabled"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", u.Name, u.Role, state, u.CreatedAt.Format("2006-01-02 15:04"))
		}
		return w.Flush()
	case "disable", "enable":
		if err := accounts.SetDisabled(ctx, id, cmd == "disable"); err != nil {
			return fmt.Errorf("%s %s: %w", cmd, name, err)
		}
		fmt.Fprintf(stdout, "%sd %s\n", cmd, name)
		return nil
	}
	if *invite {
		var link auth.PasswordLink
		if cmd == "add" {
			if _, link, err = accounts.CreateInvitedUser(ctx, name, auth.Role(*role)); err != nil {
				return fmt.Errorf("add %s: %w", name, err)
			}
			fmt.Fprintf(stdout, "created %s (%s)\n", name, *role)
		} else if link, err = accounts.IssuePasswordLink(ctx, id); err != nil {
			return fmt.Errorf("issue a set-password link for %s: %w", name, err)
		}
		fmt.Fprintf(stdout, "set-password link: %s\n(works once, until %s; put the server's address in front and give it to them over a safe channel)\n",
			account.SetPasswordPath(link.Token), link.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
		return nil
	}
	password, made, err := readPassword(stdin)
	if err != nil {
		return err
	}
	if cmd == "add" {
		if _, err := accounts.CreateUser(ctx, name, password, auth.Role(*role)); err != nil {
			return fmt.Errorf("add %s: %w", name, err)
		}
		fmt.Fprintf(stdout, "created %s (%s)\n", name, *role)
	} else {
		if err := accounts.SetPassword(ctx, id, password); err != nil {
			return fmt.Errorf("reset the password of %s: %w", name, err)
		}
		fmt.Fprintf(stdout, "reset the password of %s; their sessions ended\n", name)
	}
	if made {
		fmt.Fprintf(stdout, "password: %s\n(shown once; give it to them over a safe channel)\n", password)
	}
	return nil
}

// readPassword reads one line, with a prompt when r is a terminal; an
// empty line makes a password up.
func readPassword(r io.Reader) (password string, made bool, err error) {
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprint(os.Stderr, "password (empty: make one up): ")
		}
	}
	if r != nil {
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", false, fmt.Errorf("read the password from standard input: %w", err)
		}
		if p := strings.TrimRight(line, "\r\n"); p != "" {
			return p, false, nil
		}
	}
	return auth.RandomPassword(), true, nil
}
