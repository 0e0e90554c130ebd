import type { ReactNode, TableHTMLAttributes } from "react";

// Table is a list as the pages draw one: it scrolls sideways on its own
// on a narrow screen instead of the page. heads are the columns' headers
// (false leaves a column out); actions, when given, heads a last column
// of buttons: read out to screen readers, not shown. Other props go to
// the table element.
export function Table(props: { heads: (ReactNode | false)[]; actions?: string; children: ReactNode } & TableHTMLAttributes<HTMLTableElement> & Record<`data-${string}`, string | undefined>) {
  const { heads, actions, children, ...table } = props;
  return (
    <div className="table-scroll">
      <table {...table}>
        <thead>
          <tr>
            {heads.map((h, i) => h !== false && <th key={i}>{h}</th>)}
            {actions !== undefined && <th>{actions && <span className="visually-hidden">{actions}</span>}</th>}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}
