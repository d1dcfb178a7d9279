/* screen - curses for `bellows top`, see screen.h.
 */
#include "screen.h"

#include <bellows/error.h>

#include <curses.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t screen_on;   /* curses owns the terminal */
static volatile sig_atomic_t screen_stop; /* a stop signal arrived */
static bool screen_atexit;                /* the exit hook is installed */
static bool screen_colour;                /* colour pairs are in use */

/* Colour pairs of the cells' meanings. */
enum {
	SCREEN_PAIR_ALERT = 1,
	SCREEN_PAIR_CRITICAL,
	SCREEN_PAIR_STABLE,
	SCREEN_PAIR_CHANGED,
	SCREEN_PAIR_LEVEL,
};

void
dash_screen_close(void)
{
	if (!screen_on)
		return;
	screen_on = 0;
	curs_set(1);
	endwin();
}

static void
screen_on_stop(int sig)
{
	(void)sig;
	screen_stop = 1;
}

/* A crash: give the terminal back, then die of the same signal. endwin
 * is not async-signal-safe, but the process is lost anyway and a
 * terminal left in raw mode is worse. */
static void
screen_on_crash(int sig)
{
	if (screen_on) {
		screen_on = 0;
		endwin();
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

bool
dash_screen_stop_requested(void)
{
	return screen_stop != 0;
}

int
dash_screen_open(bool colour)
{
	/* Every signal whose default would end the process with the
	 * terminal still in curses' modes: a request to stop (Ctrl-C and
	 * Ctrl-\ reach it as signals in cbreak mode, a closed terminal as
	 * SIGHUP, kill as SIGTERM, the user signals and an alarm nobody
	 * set) ends the loop cleanly; the rest are faults or limits. */
	static const int stops[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
		SIGUSR2, SIGALRM };
	static const int crashes[] = { SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGILL,
		SIGTRAP, SIGSYS, SIGXCPU, SIGXFSZ };
	struct sigaction sa;

	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
		return BELLOWS_EINVAL;
	if (initscr() == NULL)
		return BELLOWS_EINVAL;
	screen_on = 1;
	if (!screen_atexit) {
		atexit(dash_screen_close);
		screen_atexit = true;
	}
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = screen_on_stop;
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		sigaction(stops[i], &sa, NULL);
	sa.sa_handler = screen_on_crash;
	for (size_t i = 0; i < sizeof(crashes) / sizeof(crashes[0]); i++)
		sigaction(crashes[i], &sa, NULL);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	/* Esc alone should not wait a second for an escape sequence. */
	set_escdelay(25);
	curs_set(0);
	screen_colour = colour && has_colors() && start_color() == OK;
	if (screen_colour) {
		use_default_colors();
		init_pair(SCREEN_PAIR_ALERT, COLOR_RED, -1);
		init_pair(SCREEN_PAIR_CRITICAL, COLOR_MAGENTA, -1);
		init_pair(SCREEN_PAIR_STABLE, COLOR_GREEN, -1);
		init_pair(SCREEN_PAIR_CHANGED, COLOR_YELLOW, -1);
		init_pair(SCREEN_PAIR_LEVEL, COLOR_CYAN, -1);
	}
	return 0;
}

void
dash_fatal(const char *fmt, ...)
{
	va_list ap;

	dash_screen_close();
	fprintf(stderr, "bellows top: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void
dash_screen_size(int *ret_rows, int *ret_cols)
{
	int r, c;

	getmaxyx(stdscr, r, c);
	*ret_rows = r > 0 ? r : 1;
	*ret_cols = c > 0 ? c : 1;
}

static chtype
screen_attr(uint8_t a)
{
	chtype v = A_NORMAL;

	if (a & DASH_ATTR_BOLD)
		v |= A_BOLD;
	if (a & DASH_ATTR_REVERSE)
		v |= A_REVERSE;
	if (!screen_colour) {
		if (a & DASH_ATTR_ALERT)
			v |= A_BOLD | A_UNDERLINE;
		if (a & DASH_ATTR_CRITICAL)
			v |= A_BOLD;
		if (a & DASH_ATTR_CHANGED)
			v |= A_UNDERLINE;
		if (a & DASH_ATTR_RAW)
			v |= A_DIM;
		return v;
	}
	/* One colour a cell: an error before a change before a regime
	 * before a level. */
	if (a & DASH_ATTR_ALERT)
		v |= COLOR_PAIR(SCREEN_PAIR_ALERT) | A_BOLD;
	else if (a & DASH_ATTR_CHANGED)
		v |= COLOR_PAIR(SCREEN_PAIR_CHANGED) | A_BOLD;
	else if (a & DASH_ATTR_CRITICAL)
		v |= COLOR_PAIR(SCREEN_PAIR_CRITICAL);
	else if (a & DASH_ATTR_STABLE)
		v |= COLOR_PAIR(SCREEN_PAIR_STABLE);
	else if (a & DASH_ATTR_LEVEL)
		v |= COLOR_PAIR(SCREEN_PAIR_LEVEL);
	else if (a & DASH_ATTR_RAW)
		v |= A_DIM;
	return v;
}

void
dash_screen_draw(const dash_canvas *c)
{
	int rows, cols;

	dash_screen_size(&rows, &cols);
	for (int r = 0; r < c->rows && r < rows; r++) {
		for (int k = 0; k < c->cols && k < cols; k++) {
			size_t at = (size_t)r * (size_t)c->cols + (size_t)k;

			/* The bottom-right cell would scroll some
			 * terminals: leave it. */
			if (r == rows - 1 && k == cols - 1)
				break;
			mvaddch(r, k,
			    (chtype)(unsigned char)c->text[at] |
				screen_attr(c->attr[at]));
		}
	}
	/* Only the cells that differ from the last frame are sent. */
	wnoutrefresh(stdscr);
	doupdate();
}

int
dash_screen_key(void)
{
	int k = getch();

	switch (k) {
	case ERR:
		return -1;
	case KEY_RESIZE:
		return 0;
	case KEY_UP:
		return DASH_KEY_UP;
	case KEY_DOWN:
		return DASH_KEY_DOWN;
	case KEY_LEFT:
		return DASH_KEY_LEFT;
	case KEY_RIGHT:
		return DASH_KEY_RIGHT;
	case KEY_PPAGE:
		return DASH_KEY_PGUP;
	case KEY_NPAGE:
		return DASH_KEY_PGDN;
	case KEY_HOME:
		return DASH_KEY_HOME;
	case KEY_END:
		return DASH_KEY_END;
	case KEY_BTAB:
		return DASH_KEY_BTAB;
	case KEY_ENTER:
	case '\r':
	case '\n':
		return DASH_KEY_ENTER;
	case KEY_BACKSPACE:
	case 0x7f:
	case 8:
		return DASH_KEY_BACKSPACE;
	case '\t':
		return DASH_KEY_TAB;
	case 27:
		return DASH_KEY_ESC;
	default:
		return k >= 0x20 && k < 0x7f ? k : -1;
	}
}
