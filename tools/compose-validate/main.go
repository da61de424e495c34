// compose-validate loads a Compose file the way the `docker compose` CLI does (compose-go, the CLI's own
// loader: schema validation, interpolation, merging of several -f files, profiles, consistency checks)
// and fails on any error. No Docker engine is needed.
//
//	compose-validate [-f FILE]... [--profile NAME]... [--env-file FILE] [--format quiet|services|json]
//
// Without -f it reads compose.yaml in the working directory. Like the CLI, the process environment and
// the .env file beside the first Compose file are used for interpolation (--no-dotenv skips .env).
// --format services prints the services a `docker compose --profile ... up` would start, one a line;
// json prints the resolved project (what `docker compose config --format json` prints).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var files, profiles, envFiles list
	flag.Var(&files, "f", "Compose file (repeatable; later files override earlier ones)")
	flag.Var(&profiles, "profile", "profile to enable (repeatable)")
	flag.Var(&envFiles, "env-file", "environment file for interpolation (repeatable; default .env)")
	noDotEnv := flag.Bool("no-dotenv", false, "do not read .env for interpolation")
	format := flag.String("format", "quiet", "quiet, services or json")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments: %v", flag.Args()))
	}
	if len(files) == 0 {
		files = list{"compose.yaml"}
	}
	workDir, err := filepath.Abs(filepath.Dir(files[0]))
	if err != nil {
		fail(err)
	}
	opts := []cli.ProjectOptionsFn{cli.WithWorkingDirectory(workDir), cli.WithOsEnv}
	if !*noDotEnv {
		opts = append(opts, cli.WithEnvFiles(envFiles...), cli.WithDotEnv)
	}
	opts = append(opts, cli.WithDefaultProfiles(profiles...))
	options, err := cli.NewProjectOptions(files, opts...)
	if err != nil {
		fail(err)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fail(err)
	}
	// As `docker compose config` does: resolve each service's environment (env_file, pass-through names).
	if project, err = project.WithServicesEnvironmentResolved(true); err != nil {
		fail(err)
	}
	switch *format {
	case "quiet":
	case "services":
		names := project.ServiceNames()
		sort.Strings(names)
		for _, name := range names {
			fmt.Println(name)
		}
	case "json":
		out, err := project.MarshalJSON()
		if err != nil {
			fail(err)
		}
		fmt.Println(string(out))
	default:
		fail(fmt.Errorf("unknown --format %q: quiet, services or json", *format))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compose-validate:", err)
	os.Exit(1)
}
